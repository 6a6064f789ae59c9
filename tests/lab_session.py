"""JupyterLab in headless Chromium, driven as a user would: for test_browser.py.

    with LabServer(root, env) as lab, Browser() as browser:
        page = NotebookPage(browser.driver, lab, "quickstart.ipynb")
        page.run_all()                 # JupyterLab's own Run All command
        page.cells()                   # what each cell holds, as the front end has it

The server runs on a free loopback port with a random token, its settings,
workspaces and runtime files in private folders (a user's own JupyterLab
settings cannot change what the test sees); it is stopped by its pid. The
browser is Debian's chromium with its chromedriver, never a downloaded one.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# The apt packages that provide them on Debian/Ubuntu (said in skip reasons).
APT_PACKAGES = "chromium chromium-driver"


def missing_browser() -> str | None:
    """Why the browser test cannot run here, or None when it can."""
    for module in ("selenium", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed: ./dev deps in a checkout (or pip install '.[test,notebook]')"
    if not any(shutil.which(name) for name in CHROMIUM_NAMES):
        return f"no Chromium on PATH: apt-get install {APT_PACKAGES}"
    if not shutil.which("chromedriver"):
        return f"no chromedriver on PATH: apt-get install {APT_PACKAGES}"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# JupyterLab settings for the test: every cell rendered (no virtual
# scrolling, so off-screen outputs exist in the page) and no news pop-up.
_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}


class LabServer:
    def __init__(self, root: Path, env: dict, state: Path):
        self.root, self.env, self.state = root, env, state
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "LabServer":
        settings = self.state / "settings"
        for name, value in _SETTINGS.items():
            (settings / name).parent.mkdir(parents=True, exist_ok=True)
            (settings / name).write_text(json.dumps(value))
        env = dict(self.env, JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.state / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(self.state / "runtime"),
                   JUPYTER_CONFIG_DIR=str(self.state / "config"))
        self.log = open(self.state / "server.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
             f"--ServerApp.root_dir={self.root}", "--LabApp.expose_app_in_browser=True",
             "--ServerApp.terminals_enabled=False"]
            + (["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
            cwd=self.root, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready(timeout=90)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited ({self.process.returncode}): {self.server_log()}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer within {timeout} s: {self.server_log()}")

    def server_log(self) -> str:
        return (self.state / "server.log").read_text()[-3000:]

    def __exit__(self, *exc) -> None:
        # By its pid: SIGTERM lets the server shut its kernels down; then the
        # process group (its own session), should anything outlive it.
        pid = self.process.pid
        os.kill(pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        try:
            os.killpg(pid, signal.SIGKILL)  # the group's leader is gone; its kernels may not be
        except ProcessLookupError:
            pass
        self.log.close()


class Browser:
    def __enter__(self) -> "Browser":
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = next(shutil.which(n) for n in CHROMIUM_NAMES if shutil.which(n))
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--window-size=1200,1000", "--force-device-scale-factor=1"):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                                       options=options)
        return self

    def __exit__(self, *exc) -> None:
        self.driver.quit()


# What each cell holds, read from JupyterLab's own notebook model and DOM.
_CELLS_JS = """
const panel = window.jupyterapp.shell.currentWidget;
return panel.content.widgets.map((cell, index) => {
  const model = cell.model;
  const outputs = model.type === 'code' ? model.outputs.toJSON() : [];
  return {index: index, type: model.type, source: model.sharedModel.getSource(),
          count: model.type === 'code' ? model.executionCount : null,
          tags: model.getMetadata('tags') || [],
          prompt: (cell.node.querySelector('.jp-InputPrompt') || {}).textContent || '',
          outputs: outputs, shown: (cell.node.querySelector('.jp-Cell-outputArea') || {}).innerText || ''};
});
"""

_READY_JS = """
const app = window.jupyterapp;
const panel = app && app.shell.currentWidget;
if (!panel || !panel.sessionContext || !panel.content || !panel.content.widgets.length) return 'no notebook';
if (arguments.length && panel.context.path !== arguments[0]) return 'another notebook';
const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
return kernel ? kernel.status : 'no kernel';
"""


class NotebookPage:
    def __init__(self, driver, lab: LabServer, name: str):
        self.driver, self.name = driver, name
        driver.get(f"{lab.base}/lab/tree/{name}?token={lab.token}")
        self._wait(lambda: driver.execute_script(_READY_JS, name) == "idle", 120, f"{name} and its kernel")

    def shut_down(self) -> None:
        """Stop this notebook's kernel (the server keeps it running otherwise)."""
        self.driver.execute_script("return window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")

    def _wait(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except Exception:  # noqa: BLE001  (the page is still loading)
                pass
            time.sleep(0.5)
        raise TimeoutError(f"waited {timeout} s for {what}")

    def run_all(self, timeout: float = 540) -> list[dict]:
        """JupyterLab's Run All, then wait until no cell is queued or
        running. Stops at the first cell that failed (JupyterLab itself
        skips the rest), so a failure is reported at once."""
        self.driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        quiet_polls = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(1.0)
            cells = self.cells()
            busy = any("*" in c["prompt"] for c in cells) or self.driver.execute_script(_READY_JS) != "idle"
            quiet_polls = 0 if busy else quiet_polls + 1
            if quiet_polls >= 3:  # idle for a few polls: Run All is over
                return cells
        raise TimeoutError(f"{self.name}: cells still running after {timeout} s")

    def cells(self) -> list[dict]:
        return self.driver.execute_script(_CELLS_JS)

    def cell_node(self, index: int):
        return self.driver.execute_script(
            "return window.jupyterapp.shell.currentWidget.content.widgets[arguments[0]].node", index)

    def screenshot(self, index: int, path: Path) -> None:
        """The cell (input and outputs) as a PNG."""
        node = self.cell_node(index)
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", node)
        time.sleep(0.3)
        path.parent.mkdir(parents=True, exist_ok=True)
        node.screenshot(str(path))
