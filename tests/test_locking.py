"""A build waits for another process building the same key, and gives up with
a message naming that process instead of hanging."""
from __future__ import annotations

import os

import pytest

import registry
from registry import _core


def test_a_waiter_times_out_naming_the_holder(axpy_copy, cache_root, monkeypatch):
    registry.get(axpy_copy.name, device="cpu")
    key = registry.status(axpy_copy.name, device="cpu").key
    lock_path = _core.CacheStore(str(cache_root)).lock_path(key)
    holder = _core.FileLock.try_acquire(lock_path)  # a second open file: flock blocks this process too
    assert holder is not None
    monkeypatch.setenv("REGISTRY_LOCK_TIMEOUT", "0.5")
    try:
        with pytest.raises(registry.LockTimeoutError) as info:
            registry.get(axpy_copy.name, device="cpu", rebuild=True)
        assert f"pid={os.getpid()}" in str(info.value) and "REGISTRY_LOCK_TIMEOUT" in str(info.value)
    finally:
        holder.release()
    registry.get(axpy_copy.name, device="cpu", rebuild=True)  # the holder is gone: it builds
