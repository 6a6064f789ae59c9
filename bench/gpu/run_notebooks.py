"""Executes notebooks/*.ipynb headless with nbclient (on CUDA when there is a
GPU) and saves the executed copies into the folder given as argv[1]."""
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

out = Path(sys.argv[1])
for path in sorted(Path("notebooks").glob("*.ipynb")):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()
    nbformat.write(nb, out / f"{path.stem}.executed.ipynb")
    print(f"executed {path} without errors")
