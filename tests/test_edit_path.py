"""The one-file edit's path around the compiler: what it no longer waits for.

  - the progress timer thread starts only for a build that outlasts
    SHOW_AFTER_S (progress.wait_for_build), and an interrupt still stops the
    compilers;
  - the cache's size cap is applied beside the caller after a build
    (cache_cap.collect_garbage_soon), not before the new result.
(The publish, the memo and the dependency record skip fsync: core/sync_test.cc.)
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import torch

import registry
from registry import _core
from registry.builder import cache_cap, progress


@pytest.fixture
def tickers(monkeypatch):
    """Every progress timer created, and bars shown as in a terminal."""
    made = []
    real = progress._Ticker

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(progress, "_Ticker", Recorded)
    monkeypatch.setattr(progress, "_should_show", lambda: True)  # pytest's stderr is no terminal
    return made


def _python(code: str, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_fast_build_starts_no_progress_thread(tickers, tmp_path, capsys):
    out, err = progress.wait_for_build(_python("print('done')", tmp_path), "axpy", "the kernel library",
                                       build_dir=tmp_path)
    assert out == "done\n" and err == ""
    assert tickers == []
    assert capsys.readouterr().err == ""


def test_a_one_file_edit_starts_no_progress_thread(axpy_copy, tickers, monkeypatch):
    op = registry.get(axpy_copy.name, device="cpu")
    tickers.clear()  # the first get may have built the op's binding, through load()
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 60.0)  # however busy the machine, this build is "fast"
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha,", "6.0f + axpy_element(alpha,")
    registry.get(axpy_copy.name, device="cpu")
    assert op(torch.ones(8), torch.ones(8), 2.0)[0].item() == 9.0
    assert registry.status(axpy_copy.name, device="cpu").compiled == ["lib"]
    assert tickers == []


def test_a_slow_build_shows_progress_timed_from_its_start(tickers, tmp_path, capsys):
    started = time.monotonic()
    out, _ = progress.wait_for_build(_python("import time; time.sleep(1.2); print('done')", tmp_path),
                                     "axpy", "the kernel library", 3.0, build_dir=tmp_path)
    assert out == "done\n"
    assert len(tickers) == 1 and not tickers[0].is_alive()
    assert abs(tickers[0].start_time - started) < 0.2  # the bar counts the first SHOW_AFTER_S too
    err = capsys.readouterr().err
    assert "building the kernel library of axpy" in err and "done after 1." in err


def test_an_interrupt_stops_the_build_it_waits_for(tmp_path, monkeypatch):
    process = _python("import time; time.sleep(60)", tmp_path)
    grandchild = subprocess.Popen(["sleep", "60"], cwd=tmp_path)  # as cc1plus under the driver
    real = process.communicate

    def interrupted(timeout=None):
        if timeout is None:
            raise KeyboardInterrupt
        return real(timeout=timeout)

    monkeypatch.setattr(process, "communicate", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            progress.wait_for_build(process, "axpy", "the kernel library", build_dir=tmp_path)
        assert process.returncode is not None and process.returncode != 0
        assert grandchild.wait(timeout=5) != 0
    finally:
        for p in (process, grandchild):
            if p.poll() is None:
                p.kill()


def _unpinned_entry(store) -> str:
    """A published entry no process has loaded: the first a cap of 1 byte removes."""
    staging = store.make_staging_dir()
    with open(f"{staging}/old.so", "wb") as f:
        f.write(b"old bytes")
    entry = _core.Entry()
    entry.key, entry.kernel, entry.backend, entry.kind, entry.artifact = "ab" * 16, "old", "cpu", "kernel-lib", "old.so"
    store.publish(staging, entry)
    return entry.key


def test_an_edit_returns_before_the_cache_cap_is_applied(axpy_copy, cache_root, monkeypatch):
    op = registry.get(axpy_copy.name, device="cpu")
    x, y = torch.ones(8), torch.ones(8)
    store = _core.CacheStore(str(cache_root))
    old = _unpinned_entry(store)
    entered, release, calls = threading.Event(), threading.Event(), []
    real = cache_cap._collect

    def held(*args):
        calls.append(args)
        entered.set()
        release.wait(30)
        return real(*args)

    monkeypatch.setattr(cache_cap, "_collect", held)
    monkeypatch.setenv("REGISTRY_CACHE_MAX_BYTES", "1")
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha,", "4.0f + axpy_element(alpha,")
    try:
        registry.get(axpy_copy.name, device="cpu")
        assert op(x, y, 2.0)[0].item() == 7.0  # the new result, while the cap waits (or before it starts)
        assert entered.wait(10), "no collection was started after the build"
        assert len(calls) == 1 and store.lookup(old).entry is not None
        new_key = registry.status(axpy_copy.name, device="cpu").key
        assert new_key in calls[0][2]  # what was just published is kept
    finally:
        release.set()
        cache_cap.wait_for_collections()
    # Then applied: the unpinned entry is gone; what this process loaded stays.
    assert store.lookup(old).entry is None
    assert store.lookup(new_key).entry is not None
    assert op(x, y, 2.0)[0].item() == 7.0


def test_a_bad_cache_cap_still_fails_the_get_that_compiled(axpy_copy, monkeypatch):
    registry.get(axpy_copy.name, device="cpu")
    monkeypatch.setenv("REGISTRY_CACHE_MAX_BYTES", "twenty gigs")
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha,", "5.0f + axpy_element(alpha,")
    with pytest.raises(Exception, match="REGISTRY_CACHE_MAX_BYTES"):
        registry.get(axpy_copy.name, device="cpu")


def test_a_forked_child_applies_the_cap_on_its_own_worker(private_cache_store):
    import os

    store = private_cache_store
    cache_cap.collect_garbage_soon(store, 1 << 40).result(timeout=30)  # the parent's worker exists
    pid = os.fork()
    if pid == 0:  # the child: its inherited executor has no thread; a new one must run the job
        code = 1
        try:
            report = cache_cap.collect_garbage_soon(store, 1 << 40).result(timeout=20)
            code = 0 if report is not None else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def private_cache_store(tmp_path):
    return _core.CacheStore(str(tmp_path / "cache"))
