"""This process's claim on the cache entries it has loaded, and the size cap.

A loaded library stays mapped from its file in the cache, and a later `get`
in a new process expects the entry it was given to still be there; so `cache
gc` must not remove what a live process has loaded. Each pin is a shared
flock() on the entry's `used` file (see registry/core/cache_store.h), held
for the rest of the process's life: the kernel drops it when the process
exits, however it exits, so a crashed notebook never keeps an entry forever.
"""
from __future__ import annotations

import warnings

from registry import knobs
from registry.state import STATE


def hold(store, key_hex: str) -> None:
    """Pins the entry `key_hex` until this process exits (once per key), and
    marks it used. The pins are the process state's (state.py).

    Raises RuntimeError ("call get() again") in the rare case that a `cache
    gc` in another process removed the entry since it was looked up."""
    STATE.pins.hold(store, [key_hex])


def held() -> list[str]:
    """The keys this process has pinned."""
    return STATE.pins.held()


def collect_garbage(store, keep=()):
    """Brings the cache back under REGISTRY_CACHE_MAX_BYTES after a publish,
    least recently used first, never touching pinned entries or `keep` (the
    entry just published, not pinned yet). Returns the _core.GcReport, or None
    when it could not run: then it warns instead of failing the build that
    just succeeded, since a cache a little over its cap harms nobody."""
    try:
        return store.gc(knobs.cache_max_bytes(), list(keep))
    except (OSError, RuntimeError, ValueError) as error:
        warnings.warn(f"cache size cap not applied: {error}", RuntimeWarning, stacklevel=2)
        return None
