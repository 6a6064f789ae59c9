"""Two builds side by side in a notebook: their progress is drawn as
outputs replaced in place, with no terminal control characters.

Runs a real Jupyter kernel (nbclient) with two build_progress blocks in two
threads, as kernel.resolve builds the kernel library and the op binding. A
terminal bar there writes carriage returns and cursor-up escapes (ESC [A)
that a notebook shows as blank or garbled lines. Checked with and without
ipywidgets importable: the display must not depend on a widget library.
"""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

CHECKOUT = __import__("pathlib").Path(__file__).resolve().parent.parent

CELL = """
import sys, threading, time
sys.path.insert(0, {checkout!r})
{hide_widgets}
from registry.builder.progress import build_progress

def build(what, seconds):
    with build_progress("axpy", what, 1.0):
        time.sleep(seconds)

threads = [threading.Thread(target=build, args=("the kernel library", 1.2)),
           threading.Thread(target=build, args=("the op binding", 1.6))]
for t in threads: t.start()
for t in threads: t.join()
print("both built")
"""


def _texts(outputs) -> list[str]:
    texts = []
    for output in outputs:
        if output.output_type == "stream":
            texts.append(output.text)
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/"):
                texts.append(value)
    return texts


@pytest.mark.parametrize("widgets", ["with ipywidgets", "without ipywidgets"])
def test_two_builds_side_by_side_show_clean_progress_in_a_notebook(widgets, tmp_path):
    hide = "sys.modules['ipywidgets'] = None  # as if not installed" if widgets == "without ipywidgets" else ""
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(CELL.format(checkout=str(CHECKOUT), hide_widgets=hide)))
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = notebook.cells[0].outputs
    texts = _texts(outputs)
    garbled = [t for t in texts if "\x1b" in t or "\r" in t]
    assert not garbled, f"terminal control characters in the notebook's outputs: {garbled[:3]!r}"
    # One output per build, each left in its final state (nbclient applies
    # update_display to the output that has the display id).
    displays = [o for o in outputs if o.output_type == "display_data"]
    final = [o["data"]["text/plain"] for o in displays]
    assert len(displays) == 2, f"expected one progress output per build, got {final!r}"
    assert any("the kernel library of axpy: done after" in t for t in final), final
    assert any("the op binding of axpy: done after" in t for t in final), final
    assert all("<progress" in o["data"]["text/html"] for o in displays)
    assert "both built" in "".join(texts)
