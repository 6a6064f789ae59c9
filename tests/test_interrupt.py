"""Ctrl-C during a build: the process stops with KeyboardInterrupt, no compiler
outlives it, nothing half-built is published, and the next get builds.

The build is made slow on purpose (a constexpr loop the compiler evaluates
for several seconds), and runs in a child Python so the SIGINT hits only it.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

import registry
from registry import _core

pytestmark = pytest.mark.slow

# ~5-10 s of constant evaluation in g++ on a small machine; the nonce keeps
# ccache (shared across test runs) from serving an earlier run's object.
SLOW_SOURCE = """
// Slow on purpose: the compiler evaluates this loop (tests/test_interrupt.py).
#define KREG_SLOW_NONCE {nonce}ULL
constexpr unsigned long long kreg_slow(unsigned long long outer) {{
  unsigned long long s = KREG_SLOW_NONCE;
  for (unsigned long long o = 0; o < outer; ++o)
    for (unsigned long long i = 0; i < 100000; ++i) s = s * 6364136223846793005ULL + i;
  return s;
}}
static_assert(kreg_slow(15) != 1, "slow on purpose");
"""

# A parent that ignores SIGINT (a shell's background job, some CI runners)
# passes the ignore on, and Python then never raises KeyboardInterrupt:
# restore the default handler first. With "--wrap-load", the child wraps
# torch's load() the way torch_extension.build is to (see registry/builder/progress.py).
CHILD = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import registry
if "--wrap-load" in sys.argv:
    from torch.utils import cpp_extension
    from registry.builder.progress import build_progress
    real_load = cpp_extension.load
    def load(*args, **kwargs):
        with build_progress(sys.argv[1], "the kernel library", None, build_dir=kwargs["build_directory"]):
            return real_load(*args, **kwargs)
    cpp_extension.load = load
op = registry.get(sys.argv[1], device="cpu")
print("outcome", registry.status(sys.argv[1], device="cpu").outcome, flush=True)
"""

# Whether torch_extension.build / misses.build_missing already call the clean-up in registry/builder/progress.py.
BUILDER_CLEANS_UP = "build_progress" in (Path(registry.__file__).parent / "builder" / "torch_extension.py").read_text()
WORKERS_STOPPED = "stop_builds_of_this_process" in (Path(registry.__file__).parent / "builder" / "misses.py").read_text()
NOT_WIRED = ("torch_extension.build does not call progress.build_progress(build_dir=staging) yet: on SIGINT "
             "subprocess.run SIGKILLs ninja before ninja can stop its compilers, which run in their own "
             "process groups and so outlive even a Ctrl-C to the whole group")


def _proc_stat(pid: int) -> tuple[int, str, str, int] | None:
    """(ppid, name, state, start time) of a live process, None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), name, fields[0], int(fields[19])


def _descendants(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (name, start time) for every process below root."""
    parents: dict[int, list[int]] = {}
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _proc_stat(int(entry))) is not None:
            stats[int(entry)] = st
            parents.setdefault(st[0], []).append(int(entry))
    found, todo = {}, [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found[child] = (stats[child][1], stats[child][3])
            todo.append(child)
    return found


def _still_running(seen: dict[int, tuple[str, int]]) -> dict[int, str]:
    """Those of `seen` that still run (same pid and start time, not a zombie)."""
    alive = {}
    for pid, (name, start) in seen.items():
        st = _proc_stat(pid)
        if st is not None and st[3] == start and st[2] != "Z":
            alive[pid] = name
    return alive


def _run_child(name: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


class Interrupted(NamedTuple):
    rc: int
    output: str
    seen: dict       # pid -> (name, start time) of every build process seen
    pid: int         # the child's
    exit_s: float    # from the SIGINT to the child's exit


def _interrupt_build(name: str, whole_group: bool, wrap_load: bool = False) -> Interrupted:
    """Start a build in a child and SIGINT it about 1 s into the compile."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, name, *(["--wrap-load"] if wrap_load else [])], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
                             start_new_session=True)  # its own group, so killpg spares pytest
    seen: dict[int, tuple[str, int]] = {}
    deadline = time.monotonic() + 120
    try:
        while not any(n == "cc1plus" for n, _ in seen.values()):
            assert child.poll() is None, f"the build ended before it could be interrupted:\n{child.stdout.read()}"
            assert time.monotonic() < deadline, "no compiler started within 120 s"
            seen.update(_descendants(child.pid))
            time.sleep(0.05)
        time.sleep(1.0)
        seen.update(_descendants(child.pid))
        if whole_group:
            os.killpg(child.pid, signal.SIGINT)   # what Ctrl-C in a terminal, or Jupyter's interrupt, sends
        else:
            os.kill(child.pid, signal.SIGINT)     # `kill -INT <pid>`: the Python process alone
        interrupted_at = time.monotonic()
        output, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return Interrupted(child.returncode, output, seen, child.pid, time.monotonic() - interrupted_at)


def _exited_by_interrupt(run: Interrupted, cache_root: Path) -> None:
    assert run.rc != 0 and "KeyboardInterrupt" in run.output, f"rc {run.rc}, output:\n{run.output[-3000:]}"
    staging = cache_root / "v1" / "tmp"
    leftovers = [p.name for p in staging.iterdir() if p.name.startswith(f"{run.pid}-")] if staging.exists() else []
    assert not leftovers, f"staging folders left behind: {leftovers}"


def _survivors(seen: dict) -> dict[int, str]:
    """Build processes still running a moment after the child exited; killed
    here so a failing test leaves no compiler behind."""
    deadline = time.monotonic() + 3.0  # signal delivery and reaping take a moment
    while (alive := _still_running(seen)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def _entries(cache_root: Path, name: str) -> list[str]:
    return sorted(e.key for e in _core.CacheStore(str(cache_root)).list() if e.kernel == name and e.kind == "kernel-lib")


@pytest.fixture
def slow_copy(axpy_copy, cache_root):
    # Build the quick version first (in this process), so the binding is cached
    # and the child's only compile is the slow kernel library.
    registry.get(axpy_copy.name, device="cpu")
    source = axpy_copy.path("axpy_cpu.cpp")
    source.write_text(source.read_text() + SLOW_SOURCE.format(nonce=random.getrandbits(48)))
    return axpy_copy


def test_ctrl_c_stops_the_build_and_publishes_nothing(slow_copy, cache_root):
    before = _entries(cache_root, slow_copy.name)
    survivors = {}
    for _ in range(2):  # a second interrupted build must not publish anything either
        # To the whole process group: what Ctrl-C in a terminal, or Jupyter's interrupt, sends.
        run = _interrupt_build(slow_copy.name, whole_group=True)
        # The build was underway: a compiler (CPU kernel libraries are built
        # without ninja, by direct.py) or load()'s ninja was running.
        assert any(n in ("ninja", "cc1plus") for n, _ in run.seen.values()), f"no build seen: {run.seen}"
        _exited_by_interrupt(run, cache_root)
        survivors.update(_survivors(run.seen))
        assert _entries(cache_root, slow_copy.name) == before, "an interrupted build published a cache entry"

    fresh = _run_child(slow_copy.name)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "outcome compiled" in fresh.stdout
    assert len(_entries(cache_root, slow_copy.name)) == len(before) + 1
    if survivors and not BUILDER_CLEANS_UP:
        pytest.xfail(f"{NOT_WIRED}; survivors: {survivors}")
    assert not survivors, f"build processes survived the interrupt: {survivors}"


def test_build_progress_stops_compilers_left_by_an_interrupt(slow_copy, cache_root):
    # SIGINT to the Python process alone (`kill -INT <pid>`), with load()
    # wrapped as torch_extension.build is to wrap it: nothing may survive.
    run = _interrupt_build(slow_copy.name, whole_group=False, wrap_load=True)
    _exited_by_interrupt(run, cache_root)
    assert not _survivors(run.seen)


@pytest.mark.parametrize("whole_group", [
    pytest.param(True, id="ctrl-c"),
    pytest.param(False, id="sigint-to-python-alone", marks=pytest.mark.xfail(
        not WORKERS_STOPPED, strict=False,
        reason="misses.build_missing does not call progress.stop_builds_of_this_process on KeyboardInterrupt yet: "
               "the SIGINT reaches only the main thread, the worker threads' builds run to the end and publish, "
               "and the interrupt takes effect only then")),
])
def test_interrupt_during_side_by_side_builds_stops_both(slow_copy, tmp_path, monkeypatch, whole_group):
    # A fresh cache: the first get builds the kernel library and the op
    # binding side by side, in worker threads, which a SIGINT never reaches.
    # With Ctrl-C the ninjas get it too and stop their compilers themselves.
    cache = tmp_path / "cache"
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(cache))
    monkeypatch.setenv("CCACHE_DISABLE", "1")  # the binding must really compile, not come from ccache
    run = _interrupt_build(slow_copy.name, whole_group=whole_group)
    _exited_by_interrupt(run, cache)
    assert not _survivors(run.seen)
    assert not _core.CacheStore(str(cache)).list(), "an interrupted build published a cache entry"
    assert run.exit_s < 10, f"the interrupt took {run.exit_s:.1f} s to stop the builds"


# build_progress on its own: the bar appears only for slow blocks and closes on any exit.

@pytest.fixture
def shown(monkeypatch):
    from registry.builder import progress

    monkeypatch.setattr(progress, "_should_show", lambda: True)  # pytest's stderr is no terminal
    return progress


def test_progress_shows_for_a_slow_build_and_stays_silent_for_a_fast_one(shown, capsys):
    with shown.build_progress("axpy", "the kernel library", 2.0):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""
    with shown.build_progress("axpy", "the kernel library", 2.0) as ticker:
        time.sleep(1.0)
    err = capsys.readouterr().err
    assert "building the kernel library of axpy" in err and "of ~2.0 s" in err
    assert not ticker.is_alive()


def test_the_final_label_says_where_the_time_went(shown, capsys):
    with shown.build_progress("gemm", "the device code (NVRTC)", None) as ticker:
        time.sleep(0.8)
        ticker.detail = "front end 8.7 s, NVVM 12.0 s, ptxas 0.4 s"
    err = capsys.readouterr().err
    assert "done after" in err and "(front end 8.7 s, NVVM 12.0 s, ptxas 0.4 s)" in err, err


def test_progress_closes_on_keyboard_interrupt(shown, capsys, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with shown.build_progress("axpy", "the op binding", None, build_dir=tmp_path) as ticker:
            time.sleep(0.8)
            raise KeyboardInterrupt
    assert not ticker.is_alive()
    assert "interrupted after" in capsys.readouterr().err


def test_kill_build_processes_stops_what_runs_in_the_folder(tmp_path):
    from registry.builder.build_processes import kill_build_processes, processes_in

    sleeper = subprocess.Popen(["sleep", "60"], cwd=tmp_path)
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        assert processes_in(tmp_path) == [sleeper.pid]
        assert kill_build_processes(tmp_path) == [sleeper.pid]
        assert sleeper.wait(timeout=5) != 0
        assert bystander.poll() is None
    finally:
        for p in (sleeper, bystander):
            p.kill()
            p.wait()
