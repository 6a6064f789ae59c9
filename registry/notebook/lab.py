"""Open the quickstart notebook in JupyterLab.

    python -m registry.lab [JUPYTERLAB OPTIONS...]

Starts JupyterLab with the checkout as its root and notebooks/quickstart.ipynb
open (dtype_sweep.ipynb is beside it). Options are passed on, e.g.
`--no-browser` on a remote machine, `--port=8890`.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
NOTEBOOK = Path("notebooks") / "quickstart.ipynb"


def command(extra: list[str]) -> list[str]:
    """The JupyterLab command line (this Python's, so its kernel imports this registry)."""
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={CHECKOUT}", str(CHECKOUT / NOTEBOOK), *extra]


def main(argv: list[str]) -> int:
    if not (CHECKOUT / NOTEBOOK).is_file():
        print(f"{CHECKOUT / NOTEBOOK} is missing: run this from a checkout of the project.", file=sys.stderr)
        return 1
    if importlib.util.find_spec("jupyterlab") is None:
        print("JupyterLab is not installed in this Python: ./dev deps in a checkout, "
              "or pip install '.[notebook]'", file=sys.stderr)
        return 1
    argv = command(argv)
    os.execv(argv[0], argv)  # JupyterLab takes over this process (Ctrl-C stops it)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
