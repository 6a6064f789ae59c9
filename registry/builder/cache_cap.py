"""The cache's size cap, applied after each publish.

After a `get` that compiled, the cap is applied on a worker thread
(collect_garbage_soon): the scan stats every entry, milliseconds per hundred
entries, and an edit's new result should not wait for it. One worker per
process, started on first use, so two collections never overlap here (the
core's gc.lock serializes them across processes anyway).

`gc` removes least recently used entries while the cache is over
REGISTRY_CACHE_MAX_BYTES, never one a live process has pinned (state.py's pins) and
never the entries a build just published (`keep`, not pinned yet). The rules
and the locking are the core's (core/cache_store.h, `CacheStore.gc`).
"""
from __future__ import annotations

import os
import threading
import warnings

from registry import knobs
from registry.errors import RegistryError


def collect_garbage(store, keep=()):
    """Brings the cache back under REGISTRY_CACHE_MAX_BYTES after a publish,
    least recently used first, never touching pinned entries or `keep` (the
    entry just published, not pinned yet). Returns the _core.GcReport, or None
    when it could not run: then it warns instead of failing the build that
    just succeeded, since a cache a little over its cap harms nobody."""
    try:
        return store.gc(knobs.cache_max_bytes(), list(keep))
    except (OSError, RegistryError) as error:  # a bad REGISTRY_CACHE_MAX_BYTES, a cache it cannot read
        warnings.warn(f"cache size cap not applied: {error}", RuntimeWarning, stacklevel=2)
        return None


_worker = None
_worker_pid = None
_worker_lock = threading.Lock()


def collect_garbage_soon(store, max_bytes: int, keep=()):
    """Applies the cap (as collect_garbage) on the worker thread and returns
    its Future at once. The new entries are in `keep` and, once loaded,
    pinned; whatever a later `get` looks up meanwhile is verified by the
    lookup as always, so a collection running beside it is as safe as one
    in another process."""
    global _worker, _worker_pid
    with _worker_lock:
        # A forked child inherits the executor but not its thread: it starts its own.
        if _worker is None or _worker_pid != os.getpid():
            from concurrent.futures import ThreadPoolExecutor

            _worker, _worker_pid = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kreg-cache-cap"), os.getpid()
    return _worker.submit(_collect, store, max_bytes, list(keep))


def _collect(store, max_bytes: int, keep: list[str]):
    try:
        return store.gc(max_bytes, keep)
    except Exception as error:  # noqa: BLE001  a cache it cannot read must not surface as a crash elsewhere
        warnings.warn(f"cache size cap not applied: {error}", RuntimeWarning, stacklevel=2)
        return None


def wait_for_collections() -> None:
    """Returns once the collections started so far have finished (tests,
    `cache` commands that report sizes)."""
    with _worker_lock:
        worker = _worker if _worker_pid == os.getpid() else None
    if worker is not None:
        worker.submit(lambda: None).result()
