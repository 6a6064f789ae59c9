"""Shell tools: `python -m registry ...` (cli.py), installable packages
ahead of time (aot.py) and those packages built in the Hugging Face kernels
layout (hf_export.py). Nothing in the package imports them but the
`python -m registry` entry (registry/__main__.py)."""
