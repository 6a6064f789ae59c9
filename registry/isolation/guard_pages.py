"""Guard pages around the memory an isolated worker maps, and what an access
into one was (the worker's side; the parent's canaries are guards.py).

Imported by the worker as a plain module, as wire.py: standard library only.

Each CPU region the parent shares (a shared storage, a shared output pool
segment, the staging buffer) is mapped between two inaccessible pages. An
argument whose memory ends on a page (4 KiB, 64 KiB, 2 MiB, 16 MiB...) is
followed by one, so a kernel writing (or reading) just past its end, or just
before its start, dies of SIGSEGV, as the normal op dies of malloc's checks;
without the guard the access lands in whatever mapping follows, silently.
Just before the worker dies, a handler writes to its log which argument
the address borders (wire.GUARD_LOG), so the parent names it.
"""
import ctypes
import mmap
import os
import platform

import wire

PAGE = mmap.PAGESIZE
_PROT_NONE, _PROT_READ_WRITE = 0, 3
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS, _MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Mapping:
    """A region mapped at [base, end) (whole pages), with a guard page on each side."""
    __slots__ = ("reserved", "length", "base", "end")

    def __init__(self, reserved: int, length: int, base: int, end: int):
        self.reserved, self.length, self.base, self.end = reserved, length, base, end


def map_region(fd: int, size: int) -> Mapping:
    pages = (size + PAGE - 1) // PAGE * PAGE
    length = pages + 2 * PAGE
    reserved = _libc.mmap(None, length, _PROT_NONE, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
    if reserved in (None, _MAP_FAILED):
        raise OSError(ctypes.get_errno(), f"reserving {length} bytes for a shared region: {os.strerror(ctypes.get_errno())}")
    base = _libc.mmap(reserved + PAGE, pages, _PROT_READ_WRITE, _MAP_SHARED | _MAP_FIXED, fd, 0)
    if base in (None, _MAP_FAILED):
        error = ctypes.get_errno()
        _libc.munmap(reserved, length)
        raise OSError(error, f"mapping a shared region of {size} bytes: {os.strerror(error)}")
    return Mapping(reserved, length, base, base + pages)


def unmap(mapping: Mapping) -> None:
    _libc.munmap(mapping.reserved, mapping.length)


# What the fault handler reads: the regions mapped (id -> Mapping) and the
# launcher of the call in flight (worker.Launcher: values, kinds, item_sizes,
# param_regions).
MAPPINGS = {}
CURRENT = [None]


def _bordering(address: int):
    """(parameter index, "after" | "before") of the call's tensor whose region
    has the guard page holding `address`, or None."""
    launcher = CURRENT[0]
    if launcher is None:
        return None
    for region, mapping in MAPPINGS.items():
        if mapping.end <= address < mapping.reserved + mapping.length:
            side = "after"
        elif mapping.reserved <= address < mapping.base:
            side = "before"
        else:
            continue
        best = None
        for index, param_region in launcher.param_regions.items():
            if param_region != region:
                continue
            tensor = launcher.values[index]
            start, end = tensor.data, tensor.data + tensor.numel * launcher.item_sizes[index]
            key = -end if side == "after" else start
            if best is None or key < best[0]:
                best = (key, index)
        return (best[1], side) if best is not None else None
    return None


def _access(context: int) -> str:
    """"write" or "read" from the fault's CPU context where the platform says
    (x86-64: bit 1 of the page fault's error code), else "access"."""
    if context and platform.machine() in ("x86_64", "AMD64"):
        # ucontext_t: uc_flags, uc_link, stack_t (24 bytes), then gregs[23]; REG_ERR is 19.
        error_code = ctypes.c_uint64.from_address(context + 40 + 19 * 8).value
        return "write" if error_code & 2 else "read"
    return "access"


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _on_fault(signo, info, context):
    # Runs once (SA_RESETHAND): when it returns the access runs again and the
    # default action ends the worker with the signal, which the parent reports.
    try:
        address = ctypes.c_void_p.from_address(info + 16).value or 0  # siginfo_t.si_addr
        found = _bordering(address)
        if found is not None:
            os.write(2, f"{wire.GUARD_LOG} {found[0]} {found[1]} {_access(context)}\n".encode())
    except BaseException:  # noqa: BLE001  the worker dies of the signal either way
        pass


class _Sigaction(ctypes.Structure):
    # glibc's struct sigaction (x86-64 and aarch64): handler, sa_mask (1024 bits), flags, restorer
    _fields_ = [("handler", _HANDLER), ("mask", ctypes.c_uint64 * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


_SA_SIGINFO, _SA_RESETHAND = 0x4, -0x80000000  # 0x80000000 as a C int
_installed = []


def install_fault_handler() -> None:
    """Report guard page hits on SIGSEGV (a plain worker's; a sanitizer's
    worker keeps the sanitizer's handler, which reports more)."""
    action = _Sigaction()
    action.handler = _HANDLER(_on_fault)
    action.flags = _SA_SIGINFO | _SA_RESETHAND
    _installed.append(action)  # the callback lives as long as the process
    import signal

    _libc.sigaction(signal.SIGSEGV, ctypes.byref(action), None)
