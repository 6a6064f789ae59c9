"""The cache's size cap, applied after each publish.

`gc` removes least recently used entries while the cache is over
REGISTRY_CACHE_MAX_BYTES, never one a live process has pinned (pins.py) and
never the entries a build just published (`keep`, not pinned yet). The rules
and the locking are the core's (core/cache_store.h, `CacheStore.gc`).
"""
from __future__ import annotations

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
