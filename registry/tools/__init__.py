"""Shell tools: `python -m registry ...` (cli.py) and installable packages
ahead of time (aot.py). Nothing in the package imports them but the
`python -m registry` entry (registry/__main__.py)."""
