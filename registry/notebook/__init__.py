"""The notebook layer: the %registry and %%kernel magics, dtype sweeps and
the correctness checks, timing, watch, rendering errors as text/HTML,
JupyterLab and the headless quickstart."""
