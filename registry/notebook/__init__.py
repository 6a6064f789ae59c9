"""The notebook layer: what a user calls from a cell beyond get (tuning)."""
