"""CUDA memory the worker can map: an allocation's base and size from the
driver (cuMemGetAddressRange), its IPC handle (cuIpcGetMemHandle of the base,
sent once per allocation and worker), and the pointer's offset in it. The
call channel's fast path (core/isolated_call.h) is told each allocation as it
is sent, and finds the next call's pointers there without Python.

Memory IPC cannot share (cuMemMap'ed, as with expandable segments) is staged
through a cudaMalloc'ed buffer by device copies; registry.status() says so.

An allocation is known by (base, CU_POINTER_ATTRIBUTE_BUFFER_ID): torch's
caching allocator may free a segment and get a new one at the same base, whose
buffer id differs, so a stale handle is never reused.
"""
from __future__ import annotations

import ctypes
import time

CU_POINTER_ATTRIBUTE_BUFFER_ID = 7
_driver = None


def _cuda():
    global _driver
    if _driver is None:
        from registry.device.driver_module import _cuda as loaded

        driver = loaded()

        def entry(name):
            return getattr(driver, name + "_v2", None) or getattr(driver, name)

        _driver = {
            "range": entry("cuMemGetAddressRange"), "attribute": driver.cuPointerGetAttribute,
            "ipc": driver.cuIpcGetMemHandle, "sync": entry("cuStreamSynchronize"), "lib": driver,
            "query": driver.cuStreamQuery,
        }
        _driver["sync"].argtypes = [ctypes.c_void_p]
        _driver["query"].argtypes = [ctypes.c_void_p]
        _driver["range"].argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
        _driver["attribute"].argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        _driver["ipc"].argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    return _driver


def driver_entries() -> tuple[int, int, int]:
    """The addresses of cuStreamQuery, cuStreamSynchronize and cuPointerGetAttribute,
    which the call channel's fast path calls (core/isolated_call.h)."""
    driver = _cuda()
    return tuple(ctypes.cast(driver[name], ctypes.c_void_p).value for name in ("query", "sync", "attribute"))


def _check(result: int, what: str) -> None:
    if result != 0:
        from registry.device.driver_module import _check as check

        check(result, what)


SPIN_SECONDS = 0.02  # how long the stream is polled before a blocking wait (see worker.Cuda.finish)
CUDA_ERROR_NOT_READY = 600


def synchronize(stream) -> None:
    """Wait for the parent's stream: the work queued before the call has written
    its inputs. Polled first, as the worker waits for its launch: a blocking
    wait wakes ~100 us late, an idle gap on the device."""
    driver = _cuda()
    query, clock = driver["query"], time.perf_counter
    until = clock() + SPIN_SECONDS
    while True:
        result = query(stream)
        if result != CUDA_ERROR_NOT_READY:
            break
        if clock() > until:
            result = driver["sync"](stream)
            break
    _check(result, "waiting for the stream before an isolated call")


def region_of(worker, address: int) -> tuple[int, int]:
    driver = _cuda()
    buffer_id = ctypes.c_uint64()
    # The pointers of recent calls (a loop passes the same tensors): one driver
    # call says the allocation behind one is still the one seen (buffer ids are
    # never reused in a process), instead of two finding it again.
    seen = worker.cuda_pointers.get(address)
    if seen is not None and driver["attribute"](ctypes.byref(buffer_id), CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                                address) == 0 and buffer_id.value == seen[0]:
        return seen[1], seen[2]
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(driver["range"](ctypes.byref(base), ctypes.byref(size), address), "cuMemGetAddressRange")
    _check(driver["attribute"](ctypes.byref(buffer_id), CU_POINTER_ATTRIBUTE_BUFFER_ID, base.value),
           "cuPointerGetAttribute")
    known = worker.cuda_regions.get(base.value)
    if known is not None and known[0] == buffer_id.value:
        return _seen(worker, address, buffer_id.value, known[1], address - base.value)
    handle = (ctypes.c_char * 64)()
    result = driver["ipc"](ctypes.byref(handle), base.value)
    if result != 0:
        # Not cudaMalloc'ed memory (e.g. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True maps it
        # with cuMemMap, which IPC cannot share): the caller stages it through a device copy.
        worker.ipc_refused = f"cuIpcGetMemHandle refused an allocation (CUDA error {result})"
        return None
    region = worker.new_region_id()
    if known is not None:
        worker.drop_cuda_region(known[1])
    worker.send_cuda_region(region, bytes(handle), size.value,
                            (base.value, base.value + size.value, buffer_id.value))
    worker.cuda_regions[base.value] = (buffer_id.value, region)
    return _seen(worker, address, buffer_id.value, region, address - base.value)


def _seen(worker, address: int, buffer_id: int, region: int, offset: int) -> tuple[int, int]:
    if len(worker.cuda_pointers) >= 1024:  # tensors of a long-gone loop: start over
        worker.cuda_pointers.clear()
    worker.cuda_pointers[address] = (buffer_id, region, offset)
    return region, offset


def staging_buffer(worker, size: int) -> tuple[int, int]:
    """(region id, device address) of a cudaMalloc'ed buffer shared with the worker."""
    staging = getattr(worker, "cuda_staging", None)
    if staging is None or staging[2] < size:
        driver = _cuda()
        size = max(size, 1 << 20, 2 * (staging[2] if staging else 0))
        pointer = ctypes.c_uint64()
        alloc = getattr(driver["lib"], "cuMemAlloc_v2")
        _check(alloc(ctypes.byref(pointer), ctypes.c_size_t(size)), "cuMemAlloc (staging for an isolated call)")
        handle = (ctypes.c_char * 64)()
        _check(driver["ipc"](ctypes.byref(handle), pointer.value), "cuIpcGetMemHandle (staging)")
        region = worker.new_region_id()
        worker.send_cuda_region(region, bytes(handle), size)
        if staging is not None:
            worker.drop_cuda_region(staging[0])
            getattr(driver["lib"], "cuMemFree_v2")(ctypes.c_uint64(staging[1]))
        worker.cuda_staging = staging = (region, pointer.value, size)
    return staging[0], staging[1]


def copy(to: int, source: int, nbytes: int) -> None:
    driver = _cuda()
    copy_fn = getattr(driver["lib"], "cuMemcpy")
    _check(copy_fn(ctypes.c_uint64(to), ctypes.c_uint64(source), ctypes.c_size_t(nbytes)), "cuMemcpy (staging)")
