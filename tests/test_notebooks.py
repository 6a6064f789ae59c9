"""The notebooks run headless, top to bottom, without an error (CPU when no GPU).

They use this session's private cache and kernel roots: the fixtures set
REGISTRY_CACHE_DIR / REGISTRY_KERNELS_PATH in os.environ, which the
notebook's kernel process inherits.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

pytestmark = pytest.mark.slow


def test_notebooks_are_committed_without_outputs():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.execution_count is None and cell.outputs == [], f"{path.name} has outputs"


@pytest.mark.parametrize("name", ["quickstart.ipynb", "dtype_sweep.ipynb"])
def test_notebook_runs(name, kernels_root, tmp_path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    # Compiling the binding from scratch takes ~20 s on a small machine; a
    # cell waits that long at most a few times.
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if name == "dtype_sweep.ipynb":
        html = [o for o in outputs if "text/html" in o.get("data", {})]
        assert any("<table" in o["data"]["text/html"] for o in html), "the sweep table was not displayed"
        assert any("image/png" in o.get("data", {}) for o in outputs), "no plot was displayed"
    else:
        text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        assert "same handle: True" in text and "kernel axpy [" in text
        # The cell tagged raises-exception shows its compile error rendered.
        failing = [c for c in notebook.cells if "raises-exception" in c.metadata.get("tags", [])]
        assert failing and any("kreg-err" in o.get("data", {}).get("text/html", "") for o in failing[0].outputs)
    shown = [o.get("text", "") for o in outputs] + [v for o in outputs for v in o.get("data", {}).values()
                                                    if isinstance(v, str)]
    assert not [t for t in shown if "\x1b" in t or "\r" in t], "terminal control characters in the outputs"
