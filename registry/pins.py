"""This process's claim on the cache entries it has loaded.

A loaded library stays mapped from its file in the cache, and a later `get`
in a new process expects the entry it was given to still be there; so `cache
gc` must not remove what a live process has loaded. Each pin is a shared
flock() on the entry's `used` file (see registry/core/cache_store.h), held
for the rest of the process's life: the kernel drops it when the process
exits, however it exits, so a crashed notebook never keeps an entry forever.
"""
from __future__ import annotations

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
