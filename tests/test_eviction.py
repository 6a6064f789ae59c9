"""The size cap evicts least recently used entries, but never one that a live
process has loaded: it pinned it (a shared flock) for the rest of its life."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import KernelCopy
from reliability_helpers import Child, child_env, figure
from reliability_helpers import binding_seed, private_cache, private_kernels  # noqa: F401 (fixtures)

# Loads the kernel, reports its entries and whether get pinned them, then
# waits for the go file, checks the op again (after a gc) and exits.
LIVE = """
from pathlib import Path
from registry import _core, knobs
from registry.state import STATE
result = check(os.environ["KERNEL"])
status = registry.status(os.environ["KERNEL"], device="cpu")
keys = [Path(p).parent.name for p in status.artifacts.values()]
pinned_by_get = all(k in STATE.pins.held() for k in keys)
if not pinned_by_get:  # until resolve.py pins what it loads (see STATE.pins.hold)
    store = _core.CacheStore(str(knobs.cache_dir()))
    for k in keys:
        STATE.pins.hold(store, [k])
say(keys=keys, pinned_by_get=pinned_by_get, **result)
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.01)
say(**check(os.environ["KERNEL"]))
"""


def _set_used(cache: Path, key: str, when: float) -> None:
    used = cache / "v1" / "objects" / key / "used"
    used.touch()
    os.utime(used, (when, when))


def test_gc_keeps_what_a_live_process_loaded_and_evicts_the_rest(private_cache, private_kernels, tmp_path):
    from registry import _core

    live = KernelCopy(private_kernels, "axpy", "axpy_live")
    gone = KernelCopy(private_kernels, "axpy", "axpy_gone")
    # A process that loads `gone` and exits: its pins die with it.
    done = Child("say(**check(os.environ['KERNEL']))", child_env(private_cache, private_kernels, KERNEL=gone.name))
    assert done.message(timeout=180)["ok"]
    assert done.finish() == 0, done.stderr_text()

    go = tmp_path / "go"
    child = Child(LIVE, child_env(private_cache, private_kernels, KERNEL=live.name, GO=str(go)))
    try:
        loaded = child.message(timeout=180)
        assert loaded["ok"], loaded
        store = _core.CacheStore(str(private_cache))
        libs = {e.kernel: e.key for e in store.list() if e.kind == "kernel-lib"}
        binding = next(e.key for e in store.list() if e.kind == "binding")
        assert set(loaded["keys"]) == {libs[live.name], binding}
        # Make the live entry the least recently used: only its pin can save it.
        _set_used(private_cache, libs[live.name], 1_000_000)
        _set_used(private_cache, libs[gone.name], 2_000_000)

        report = store.gc(1)  # a 1-byte cap: everything unpinned must go
        assert report.removed == [libs[gone.name]]
        assert report.kept_live == 2  # the live kernel library and the binding it loaded
        assert store.lookup(libs[live.name]).entry is not None
        assert not (private_cache / "v1" / "objects" / libs[gone.name]).exists()

        go.touch()
        assert child.message(timeout=60)["ok"], "the live process's op broke after the gc"
        assert child.finish() == 0, child.stderr_text()
    finally:
        child.kill_group()

    # Its process gone, the entry is fair game.
    after = store.gc(1)
    assert sorted(after.removed) == sorted([libs[live.name], binding])
    assert after.total_bytes == 0
    figure(f"eviction: gc under a 1-byte cap removed the unpinned kernel library, kept the 2 entries "
           f"a live process had loaded (its op still correct), removed them once it exited; "
           f"pinned by registry.get itself: {'yes' if loaded['pinned_by_get'] else 'no (STATE.pins.hold fallback)'}")


def test_collect_garbage_applies_the_cap_but_keeps_the_new_entry(private_cache, monkeypatch):
    from registry import _core
    from registry.builder import cache_cap

    store = _core.CacheStore(str(private_cache))
    keys = [e.key for e in store.list()]
    assert keys, "the private cache holds the seeded binding"
    monkeypatch.setenv("REGISTRY_CACHE_MAX_BYTES", "1")
    report = cache_cap.collect_garbage(store, keep=keys)
    assert report.removed == [] and store.lookup(keys[0]).entry is not None
    report = cache_cap.collect_garbage(store)
    assert report.removed == keys


def test_collect_garbage_warns_instead_of_failing_on_a_bad_cap(private_cache, monkeypatch):
    from registry import _core
    from registry.builder import cache_cap

    monkeypatch.setenv("REGISTRY_CACHE_MAX_BYTES", "twenty gigs")
    with pytest.warns(RuntimeWarning, match="REGISTRY_CACHE_MAX_BYTES must be a size such as 20G"):
        assert cache_cap.collect_garbage(_core.CacheStore(str(private_cache))) is None


def test_pin_of_an_evicted_entry_says_what_to_do(private_cache):
    from registry import _core
    from registry.state import STATE

    store = _core.CacheStore(str(private_cache))
    with pytest.raises(RuntimeError, match=r"not in the cache .*call get\(\) again"):
        STATE.pins.hold(store, ["0" * 32])
