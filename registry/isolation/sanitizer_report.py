"""A checked call's fault as KernelFault fields, read off the sanitizer's
report in the worker's log: the kind of access, the address relative to the
nearest tensor argument (from the ranges the worker logged before the call,
wire.CHECKED_CALL_LOG), and the kernel source's file:line (the first frame
in the kernel's folder), the file the user edits.

  AddressSanitizer  "ERROR: AddressSanitizer: heap-buffer-overflow on address 0x...",
                    "WRITE of size 4 at 0x...", "#0 0x... in fn /path/file.cpp:9"
  UBSan             "/path/file.cpp:9:12: runtime error: load of misaligned address ..."
  memcheck          "Invalid __global__ write of size 4 bytes", "at fn+0x70 in /path/file.cu:9",
                    "Access to 0x... is out of bounds" ("Access at", older versions "Address 0x... is"),
                    "and is 1 bytes after the nearest allocation at 0x... of size 16,384 bytes"
"""
from __future__ import annotations

import re

from registry.isolation import wire
from registry.isolation.faults import KernelFault

_ASAN_ERROR = re.compile(r"ERROR: AddressSanitizer: ([\w-]+) on (?:unknown )?address (0x[0-9a-f]+)")
_ASAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+) at (0x[0-9a-f]+)", re.M)
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in \S+ (/[^\s:]+):(\d+)(?::(\d+))?")
_UBSAN = re.compile(r"^(/[^\s:]+):(\d+):(\d+): runtime error: (.*)$", re.M)
_MEMCHECK_ACCESS = re.compile(r"Invalid (?:(__\w+__) )?(read|write) of size (\d+) bytes?")
# The file as the compiler was given it: absolute, or relative to the build's folder ("kernel.cu").
_MEMCHECK_AT = re.compile(r"at \S.*? in ([^\s:]+):(\d+)")
_MEMCHECK_ADDRESS = re.compile(r"(?:Access (?:at|to)|Address) (0x[0-9a-f]+) is ([^\n]*)")
_MEMCHECK_NEAREST = re.compile(r"and is ([^\n]*)")
# Sizes as memcheck prints them: "of size 16,384 bytes".
_MEMCHECK_ALLOCATION = re.compile(r"([\d,]+) bytes (after|before) the nearest allocation at (0x[0-9a-f]+) of size ([\d,]+)")
_MEMCHECK_OTHER = re.compile(r"=+ (Misaligned [^\n]*|Device-side assert[^\n]*|Program hit [^\n]*|[^\n]*trap[^\n]*)", re.I)


def fault(op, recorded) -> KernelFault:
    """KernelFault of a checked call that failed (op: the IsolatedOp)."""
    from registry.errors import Diagnostic
    from registry.isolation import checked

    log = recorded.log
    built = checked.variant(op._source.kernel, op._source.backend, op._source.key)
    access, relative, where, message = "", "", None, ""
    address = None
    error = _ASAN_ERROR.search(log)
    if error is not None:
        kind, address = error.group(1), int(error.group(2), 16)
        rw = _ASAN_ACCESS.search(log, error.end())
        if kind == "SEGV":
            access = "an access to an unmapped address (SEGV)"
        else:
            direction = rw.group(1).lower() if rw else "access"
            size = f" of {rw.group(2)} bytes" if rw else ""
            access = f"an out-of-bounds {direction}{size} ({kind})" if "overflow" in kind else f"{kind} ({direction}{size})"
        where = _first_kernel_frame(log[error.end():], built)
        message = access
    ubsan = _UBSAN.search(log)
    if ubsan is not None and error is None:
        text = ubsan.group(4)
        access = ("a misaligned access: " if "misaligned" in text else "undefined behaviour: ") + text
        where = (built.original_path(ubsan.group(1)), int(ubsan.group(2)), int(ubsan.group(3)))
        message = access
    memcheck = _MEMCHECK_ACCESS.search(log)
    if memcheck is not None:
        space, direction, size = memcheck.groups()
        found = _MEMCHECK_ADDRESS.search(log, memcheck.end())
        detail = found.group(2) if found else ""
        if "misaligned" in detail:
            access = f"a misaligned {direction} of {size} bytes"
        else:
            access = f"an out-of-bounds {direction} of {size} bytes" + (f" ({space} memory)" if space else "")
        address = memcheck_address(log, memcheck.end())
        nearest = _MEMCHECK_NEAREST.search(log, memcheck.end())
        if nearest:
            relative = nearest.group(1).strip().rstrip(".")
        at = _MEMCHECK_AT.search(log, memcheck.end())
        if at:
            where = (_source_of(built, at.group(1)), int(at.group(2)), None)
        message = access
    elif not access:
        other = _MEMCHECK_OTHER.search(log)
        if other is not None:
            access = other.group(1).strip()
            at = _MEMCHECK_AT.search(log, other.end())
            if at:
                where = (_source_of(built, at.group(1)), int(at.group(2)), None)
    if address is not None:
        relative = _relative(address, log, getattr(_link_of(op, recorded.dtype), "param_names", None)) or relative
    what = recorded.what
    if access and not recorded.hang:  # the sanitizer ended the worker on purpose: say what it found instead
        tool = "compute-sanitizer's memcheck" if op.backend == "cuda" else (
            "UBSan" if ubsan is not None and error is None else "AddressSanitizer")
        what = f"{tool} stopped the kernel"
    diagnostics = [Diagnostic(where[0], where[1], where[2], "error", message or access or recorded.what)] if where else []
    return KernelFault(kernel=op.kernel, op=op.name, dtype=recorded.dtype, backend=op.backend, what=what,
                       hang=recorded.hang, checked=True, access=access, relative=relative, diagnostics=diagnostics,
                       log=log)


def memcheck_address(log: str, start: int) -> int | None:
    """The address of memcheck's report of an invalid access after `start`:
    its address line, else its distance from the allocation it names (one of
    the worker's exact-size copies when the access ran off an argument)."""
    found = _MEMCHECK_ADDRESS.search(log, start)
    if found:
        return int(found.group(1), 16)
    allocation = _MEMCHECK_ALLOCATION.search(log, start)
    if allocation is None:
        return None
    count, side, base, size = allocation.groups()
    count, base, size = int(count.replace(",", "")), int(base, 16), int(size.replace(",", ""))
    # "1 bytes after" an allocation is its first byte past the end.
    return base + size + count - 1 if side == "after" else base - count


def _source_of(built, path: str) -> str:
    """The kernel's own file for a path memcheck printed: nvcc records a source
    as it was named on its command line, relative to the kernel's folder or not."""
    import os

    if not os.path.isabs(path):
        path = os.path.join(str(built.original), path)
    return built.original_path(path)


def _first_kernel_frame(text: str, built):
    for frame in _FRAME.finditer(text):
        path = frame.group(1)
        mapped = built.original_path(path)
        if mapped != path or path.startswith(str(built.original)):
            return mapped, int(frame.group(2)), int(frame.group(3)) if frame.group(3) else None
    return None


def _link_of(op, dtype: str):
    table = op._proxy
    for link in getattr(table, "links", {}).values():
        if link.dtype == dtype:
            return link
    return None


def _relative(address: int, log: str, names) -> str:
    """The address relative to the nearest parameter range of the faulting call."""
    # The last call's line; found anywhere in a line, as the sanitizer's own
    # output shares the log and may end up in front of it.
    lines = re.findall(re.escape(wire.CHECKED_CALL_LOG) + r"((?: \d+ 0x[0-9a-f]+ 0x[0-9a-f]+)*)", log)
    if not lines:
        return ""
    fields = lines[-1].split()
    best = None
    for i in range(0, len(fields) - 2, 3):
        index, start, end = int(fields[i]), int(fields[i + 1], 16), int(fields[i + 2], 16)
        if start <= address < end:
            distance, text = 0, f"{address - start} bytes into"
        elif address >= end:
            distance, text = address - end, f"{address - end} bytes after the end of"
        else:
            distance, text = start - address, f"{start - address} bytes before the start of"
        if best is None or distance < best[0]:
            name = names[index] if names and index < len(names) else f"parameter {index}"
            best = (distance, f"{text} argument {name!r} ({end - start} bytes)")
    return best[1] if best else ""
