"""The notebooks as a user sees them: JupyterLab in headless Chromium.

Starts JupyterLab (lab_session.py), opens notebooks/quickstart.ipynb, runs
every cell with JupyterLab's Run All, and checks what the front end shows:
the op's repr, the compile error rendered with its file:line, the marked
source line and the collapsed compiler log, build progress that reached its
end without terminal escape text, and the sweep's table and plot. Then the
same for notebooks/dtype_sweep.ipynb.

Screenshots of the cells worth showing are saved to $REGISTRY_SCREENSHOTS
(docs/refresh_screenshots.sh points it at docs/screenshots), else to the
test's temporary folder. Skipped, saying why, without Chromium or its driver.

The server gets a fresh cache and ccache off: the run sees what a new user
sees, real compiles (so build progress shows) included.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from lab_session import Browser, LabServer, NotebookPage, missing_browser

CHECKOUT = Path(__file__).resolve().parent.parent
SCREENSHOTS_ENV = "REGISTRY_SCREENSHOTS"

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    for notebook in ("quickstart.ipynb", "dtype_sweep.ipynb"):
        shutil.copy(CHECKOUT / "notebooks" / notebook, root / notebook)  # autosave writes outputs here
    env = dict(os.environ, REGISTRY_CACHE_DIR=str(tmp_path_factory.mktemp("lab-cache")), REGISTRY_CCACHE="0",
               PYTHONPATH=os.pathsep.join(p for p in [str(CHECKOUT), os.environ.get("PYTHONPATH", "")] if p))
    env.pop("REGISTRY_KERNELS_PATH", None)
    with LabServer(root, env, tmp_path_factory.mktemp("lab-state")) as server, Browser() as browser:
        yield server, browser.driver


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    folder = os.environ.get(SCREENSHOTS_ENV)
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


def _cell(cells, needle: str) -> dict:
    found = [c for c in cells if c["type"] == "code" and needle in c["source"]]
    assert found, f"no code cell contains {needle!r}"
    return found[0]


def _texts(cell) -> str:
    """Every text the front end received for a cell, as one string."""
    parts = []
    for output in cell["outputs"]:
        parts.append(output.get("text", "") if isinstance(output.get("text", ""), str) else "".join(output["text"]))
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/"):
                parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def _ran_without_errors(cells, name: str) -> None:
    for cell in cells:
        if cell["type"] != "code":
            continue
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert cell["count"] is not None, f"{name}: cell {cell['index']} did not run:\n{cell['source'][:300]}"
        if "raises-exception" not in cell["tags"]:
            assert not errors, (f"{name}: cell {cell['index']} failed: {errors[0].get('ename')}: "
                                f"{errors[0].get('evalue')}\n{cell['source'][:300]}")


def _no_escape_text(cells, name: str) -> None:
    for cell in cells:
        received, shown = _texts(cell), cell["shown"]
        for text, where in ((received, "received"), (shown, "shown")):
            assert "\x1b" not in text and "\r" not in text and "[A" not in text, (
                f"{name}: cell {cell['index']} {where} terminal control text: "
                f"{json.dumps(text)[:400]}")


def _run_notebook(lab, name: str) -> tuple[NotebookPage, list[dict]]:
    """Runs every cell of notebooks/<name> in the lab: none may raise (but
    those tagged so) or show terminal control text."""
    server, driver = lab
    page = NotebookPage(driver, server, name)
    cells = page.run_all()
    _ran_without_errors(cells, name)
    _no_escape_text(cells, name)
    return page, cells


def test_quickstart_in_jupyterlab(lab, screenshots):
    driver = lab[1]
    page, cells = _run_notebook(lab, "quickstart.ipynb")

    # The op's repr, as the cell's result.
    get_cell = _cell(cells, 'axpy = registry.get("axpy")')
    assert "<registry op axpy(Tensor x, Tensor y, float alpha) -> Tensor" in get_cell["shown"], get_cell["shown"]

    # The compile error: file:line, the marked line, the log collapsed.
    error_cell = next(c for c in cells if "raises-exception" in c["tags"])
    rendered = driver.execute_script("""
        const node = arguments[0], err = node.querySelector('.kreg-err');
        if (!err) return null;
        const details = err.querySelector('details');
        return {where: Array.from(err.querySelectorAll('.where')).map(e => e.innerText),
                marked: Array.from(err.querySelectorAll('.hit')).map(e => e.innerText),
                log_open: details ? details.open : null,
                summary: details ? details.querySelector('summary').innerText : null,
                // A closed <details> hides its content without giving it zero size.
                log_visible: details ? details.querySelector('pre').checkVisibility() : null};
    """, page.cell_node(error_cell["index"]))
    assert rendered, f"no rendered compile error in the cell; it shows:\n{error_cell['shown'][:800]}"
    assert any(re.search(r"cell 'scale', line \d+, column \d+: error", w) for w in rendered["where"]), rendered
    assert any("os[i] = a * xs[i]" in m and m.lstrip().startswith(">") for m in rendered["marked"]), rendered
    assert rendered["log_open"] is False and not rendered["log_visible"], "the compiler log should start collapsed"
    assert rendered["summary"].startswith("compiler log"), rendered
    page.screenshot(error_cell["index"], screenshots / "compile_error.png")

    # Build progress: shown for the slow builds, each in its final state.
    progress = driver.execute_script("""
        return Array.from(document.querySelectorAll('.kreg-progress')).map(e => {
          const bar = e.querySelector('progress');
          return {text: e.innerText, value: bar ? bar.value : null, max: bar ? bar.max : null};
        });""")
    assert progress, "no build progress was shown (a fresh cache without ccache compiles the op binding)"
    for display in progress:
        assert re.search(r"done after \d+\.\d s$", display["text"].strip()), progress
        assert display["value"] is None or display["value"] == display["max"], progress

    # A hot reload: the same handle runs the edited header's code.
    reload_cell = _cell(cells, "same = registry.get")
    assert "same handle: True" in reload_cell["shown"] and "config.h changed" in reload_cell["shown"]
    page.screenshot(reload_cell["index"], screenshots / "hot_reload.png")

    # The sweep's table and plot.
    table_cell = _cell(cells, 'registry.sweep("axpy"')
    rows = driver.execute_script("const t = arguments[0].querySelector('.jp-OutputArea table');"
                                 "return t ? t.querySelectorAll('tbody tr').length : 0;",
                                 page.cell_node(table_cell["index"]))
    assert rows >= 3, f"the sweep table has {rows} rows"
    plot_cell = _cell(cells, "result.plot(")
    assert _image_width(driver, page, plot_cell) > 100, "the sweep plot is not shown"
    page.screenshot(table_cell["index"], screenshots / "sweep_table.png")
    page.screenshot(plot_cell["index"], screenshots / "sweep_plot.png")
    page.shut_down()


def test_dtype_sweep_in_jupyterlab(lab, screenshots):
    driver = lab[1]
    page, cells = _run_notebook(lab, "dtype_sweep.ipynb")
    sweep_cell = _cell(cells, "registry.sweep(")
    assert "<table" in _texts(sweep_cell), "the sweep table was not displayed"
    plot_cell = _cell(cells, 'result.plot("gbps")')
    assert _image_width(driver, page, plot_cell) > 100, "the bandwidth plot is not shown"
    page.screenshot(plot_cell["index"], screenshots / "dtype_sweep_plot.png")
    page.shut_down()


def _image_width(driver, page, cell) -> int:
    """Rendered width of the cell's output image (0 when none or not loaded)."""
    return driver.execute_script(
        "const img = arguments[0].querySelector('.jp-OutputArea img');"
        "return img && img.complete ? img.naturalWidth : 0;", page.cell_node(cell["index"]))
