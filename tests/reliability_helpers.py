"""Shared pieces of the reliability tests (concurrency, kills, corruption,
eviction, CLI): child processes, private caches, and the figures they report.

Fixtures here are imported by the test modules that use them; `figure`
(tests/figures.py) reports a number at the end of the run.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import CHECKOUT, KernelCopy
from figures import figure  # noqa: F401  (re-exported to the reliability tests)


# ---- caches ----------------------------------------------------------------


@pytest.fixture(scope="session")
def binding_seed(cache_root, kernels_root) -> Path:
    """The session cache, holding the shared CPU binding (built once;
    ~20 s cold). Private caches copy it from there instead of compiling it.

    Each test module imports this fixture, and pytest then runs a session
    fixture once per importing module: the folder check makes that harmless."""
    import registry

    if not (kernels_root / "axpy_seed").exists():
        KernelCopy(kernels_root, "axpy", "axpy_seed")
    registry.get("axpy_seed", device="cpu")  # the second time, a no-op
    return cache_root


def seed_cache(dest: Path, source: Path) -> Path:
    """A cache at `dest` holding copies of `source`'s CPU binding entry (the
    one binding every signature uses, core/codegen.h). The cache is
    content-addressed and entries verify by digest, so a copied folder is as
    good as one built there."""
    from registry import _core

    _core.CacheStore(str(dest))  # the layout, mode 0700
    for entry in _core.CacheStore(str(source)).list():
        if entry.kind == "binding" and entry.artifact.startswith("kreg_binding_cpu_"):
            target = dest / "v1" / "objects" / entry.key
            shutil.copytree(entry.dir, target, ignore=shutil.ignore_patterns("used"))
    return dest


@pytest.fixture
def private_cache(tmp_path, binding_seed) -> Path:
    """A cache of the test's own (gc and corruption there cannot disturb
    other tests), already holding the binding."""
    return seed_cache(tmp_path / "cache", binding_seed)


@pytest.fixture
def private_kernels(tmp_path) -> Path:
    root = tmp_path / "kernels"
    root.mkdir()
    return root


def child_env(cache: Path, kernels: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "REGISTRY_CACHE_DIR": str(cache), "REGISTRY_KERNELS_PATH": str(kernels),
           "REGISTRY_DEVICE": "cpu", "PYTHONPATH": str(CHECKOUT), "PYTHONUNBUFFERED": "1"}
    env.update(extra)
    return env


def add_slow_code(copy: KernelCopy, functions: int = 300) -> None:
    """Makes the copy's CPU unit take a couple of seconds to compile (~2.5 s
    per 400 functions at -O3 here), so a kill can land mid-compile."""
    body = "\n".join(
        f"float slow_{i}(const float* a, int n) {{ float s = {i}.0f; for (int k = 0; k < n; ++k) "
        f"s += a[k] * {i % 7 + 1}.5f - (s > {i} ? a[k] : 0.0f); return s; }}"
        for i in range(functions)
    )
    path = copy.path("axpy_cpu.cpp")
    path.write_text(path.read_text() + f"\nnamespace axpy_slow {{\n{body}\n}}\n")


# ---- child processes -------------------------------------------------------

# Child prologue: the imports a notebook would have done before its first get,
# so a timed window measures get, not interpreter start-up.
PROLOGUE = """
import json, os, sys, time
import torch
import registry
from registry.builder import step

def check(name):
    op = registry.get(name, device="cpu")
    torch.manual_seed(0)
    x, y = torch.randn(1000), torch.randn(1000)
    ok = bool(torch.allclose(op(x, y, 1.5), 1.5 * x + y))
    status = registry.status(name, device="cpu")
    return {"name": name, "ok": ok, "outcome": status.outcome, "compiled": status.compiled,
            "notes": status.notes, "changes": status.changes,
            "builds": [list(b) for b in step.builds_run]}

def say(**fields):
    # One write(2) of the whole line (atomic on a pipe): a child killed while
    # it speaks leaves a whole line or none, never a line without its newline
    # that the next speaker's line is glued to.
    sys.stdout.flush()
    os.write(1, (json.dumps(fields) + "\\n").encode())
"""


class Child:
    """A Python child in its own process group, read line by line with
    timeouts (a hang fails the test instead of stalling it)."""

    def __init__(self, script: str, env: dict[str, str], stdin: bool = False):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROLOGUE + script], env=env, cwd=str(CHECKOUT),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream, sink) -> None:
        for line in stream:
            sink(line)
        sink(None)

    def message(self, timeout: float) -> dict:
        """The next JSON line the child says; fails on timeout or exit."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill_group()
                pytest.fail(f"child hung: nothing after {timeout:.0f} s\n{self.stderr_text()}")
            if line is None:
                self.proc.wait()
                pytest.fail(f"child exited ({self.proc.returncode}) before answering\n{self.stderr_text()}")
            if line.startswith("{"):
                return json.loads(line)

    def send(self, **fields) -> None:
        self.proc.stdin.write(json.dumps(fields) + "\n")
        self.proc.stdin.flush()

    def stderr_text(self) -> str:
        return "".join(s for s in self.stderr if s)[-4000:]

    def kill(self) -> None:
        """SIGKILL the Python process only: its compilers live on, orphaned."""
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass

    def kill_group(self) -> None:
        """SIGKILL the process and every compiler it started."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def finish(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            pytest.fail(f"child did not exit within {timeout:.0f} s\n{self.stderr_text()}")


def verify_all_objects(cache: Path) -> tuple[int, list[str]]:
    """(entries that verify, problems) over every folder under objects/:
    lookup re-checks format, key, size and digest."""
    from registry import _core

    store = _core.CacheStore(str(cache))
    good, problems = 0, []
    for folder in sorted((cache / "v1" / "objects").iterdir()):
        hit = store.lookup(folder.name)
        if hit.entry is not None:
            good += 1
        else:
            problems.append(f"{folder.name}: {hit.miss_reason or 'not an entry'}")
    return good, problems
