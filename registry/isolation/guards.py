"""Canaries around the CPU arguments of an isolated call, and the words for
an access past an argument's end (the parent's side; the worker's guard
pages are guard_pages.py). On CUDA the worker keeps the canaries
(core/ring_worker.cc), in the padding the binding leaves after each output
and around staged arguments, and its G reply says which changed.

A normal op that writes a few elements past an output corrupts malloc's
heap and dies; in a worker the same write lands in shared memory that no
tensor uses (the staging buffer's next bytes, a pool segment's rounding,
the rest of a storage's last page) and the call would return normally. So
the memory right after each argument, where it is free, holds CANARY during
the call: ZONE bytes before and after each staged argument (the staging
layout leaves room), after a pool output's end up to its segment's, after
a shared storage's end up to its page's. They are written before the call
and compared after it: a few bytes per argument, no copy. An argument that
ends on a page has no such room; its guard page stops the kernel instead,
and the worker's log names the argument (wire.GUARD_LOG).
"""
from __future__ import annotations

import ctypes
import mmap

from registry.isolation import wire

ZONE = 64  # canary bytes on each side (a staged argument keeps its 64-byte alignment)
PAGE = mmap.PAGESIZE
# Not zero, not a repeated byte, not a small float: a kernel writing its
# values or clearing memory changes it.
CANARY = bytes((0xA7 + 89 * i) & 0xFF for i in range(ZONE))
_memmove, _string_at = ctypes.memmove, ctypes.string_at


def page_rest(end: int) -> int:
    """Bytes from `end` to the end of its page: mapped, and no storage's."""
    return -end % PAGE


def arm(zones: list) -> None:
    """zones: (address, bytes, parameter index, "after" | "before") each."""
    for address, size, _, _ in zones:
        _memmove(address, CANARY, size)


def broken(zones: list):
    """(parameter index, side) of the first zone the call changed, or None."""
    for address, size, index, side in zones:
        if _string_at(address, size) != (CANARY if size == ZONE else CANARY[:size]):
            return index, side
    return None


def describe(names, params, index: int, side: str, access: str = "write") -> str:
    verb = {"write": "wrote", "read": "read"}.get(access, "accessed memory")
    where = "past the end of" if side == "after" else "before the start of"
    name = names[index] if names and index < len(names) else f"parameter {index}"
    return f"the kernel {verb} {where} `{name}` (n = {params[index].numel})"


def from_log(log: str, names, params) -> str:
    """The guard page hit the dying worker logged, in words; "" if none."""
    at = log.rfind(wire.GUARD_LOG)
    if at < 0:
        return ""
    fields = log[at + len(wire.GUARD_LOG):].split("\n", 1)[0].split()
    try:
        index, side, access = int(fields[0]), fields[1], fields[2]
        return describe(names, params, index, side, access)
    except (IndexError, ValueError):
        return ""


def from_reply(reply: bytes, names, params) -> str:
    """A CUDA worker's G reply ("G<index> after|before"), in words."""
    fields = reply[1:].decode(errors="replace").split()
    try:
        return describe(names, params, int(fields[0]), fields[1])
    except (IndexError, ValueError):
        return f"the kernel wrote past an argument's end (the worker said {reply[1:]!r})"
