"""CPU memory an isolated worker maps: tensors' storages moved into shared
memory (torch's fd-backed strategy, once per storage), the shared output
pool's segments (core/shared_output_pool.h), and the staging buffer for what
is neither. Each goes to the worker once, as a region id ("M", wire.py); the
call channel's fast path (core/isolated_call.h) is told each one too, and
finds the next call's pointers there without Python. The worker maps each
region between guard pages (guard_pages.py); the free bytes after a tensor
are where guards.py keeps its canaries. cuda_memory.py is CUDA's side.

Each function takes the supervisor's Worker, which holds what was sent.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import weakref

from registry import _core
from registry.isolation import guards, wire


class CpuRegion:
    """A storage the worker maps: its id there, its range here, and a weak
    reference to it (a storage that dies leaves the channel's table at once)."""

    __slots__ = ("id", "base", "end", "storage")

    def __init__(self, region_id: int, base: int, size: int, storage):
        self.id, self.base, self.end, self.storage = region_id, base, base + size, storage


def share_storage(worker, storage) -> None:
    """Give the worker a CPU storage that lives in shared memory (moved
    there in place, once: torch's fd-backed shared memory)."""
    base = storage.data_ptr()
    region = worker.cpu_regions.get(base)
    if region is not None and region.storage() is storage:
        return
    try:
        fd, size = storage._share_fd_cpu_()
    except RuntimeError:  # shared another way (file_system strategy) or not shareable: staged instead
        return
    base = storage.data_ptr()  # moved into shared memory: a new address
    stale = worker.cpu_regions.get(base)
    if stale is not None:
        if worker.channel is not None:
            worker.channel.drop_storage(stale.id)
        worker._send(wire.DROP.pack(b"X", stale.id))
    if len(worker.cpu_regions) >= 64:
        drop_dead_regions(worker)
    region_id = worker.new_region_id()
    channel = worker.channel
    # A storage that dies leaves the channel's table at once: its range may hold other memory next.
    forget = (lambda _, channel=channel, region_id=region_id: channel.drop_storage(region_id)) if channel else None
    region = CpuRegion(region_id, base, size, weakref.ref(storage, forget))
    worker._send(wire.CPU_REGION.pack(b"M", region.id, size), [fd])
    worker.cpu_regions[base] = region
    if channel is not None:
        channel.add_storage(base, base + size, region_id)


def region_of(worker, address: int, nbytes: int):
    """(region id, offset, free bytes after it) of shared memory holding
    [address, address + nbytes), or None. Free: the rest of the storage's
    last page, where the tensor ends at the storage's end (guards.py)."""
    for region in worker.cpu_regions.values():  # a handful: the storages of recent arguments
        if region.base <= address and address + nbytes <= region.end:
            if region.storage() is None:
                # Freed: its range may now hold other memory (this one), which the
                # worker's old mapping does not show. Forget it, stage instead.
                drop_dead_regions(worker)
                return None
            end = address + nbytes
            return region.id, address - region.base, guards.page_rest(end) if end == region.end else 0
    return None


def pool_region_of(worker, address: int, nbytes: int, fresh: bool = False):
    """(region id, offset, free bytes after it) of an output the binding
    allocated from the shared output pool (core/shared_output_pool.h), or
    None. fresh: the output this call's binding just allocated, so the rest
    of its segment is free (one output a segment); a pool tensor passed
    back in may be a view, so then nothing is free. A segment's fd
    goes to this worker once; segments the pool unmapped are dropped here."""
    if nbytes < _core.SHARED_OUTPUT_MIN_BYTES:  # the pool hands out nothing smaller
        return None
    retired = _core.shared_output_take_retired()
    if retired:
        from registry.isolation.supervisor import SUPERVISOR

        for segment_id in retired:
            for other in SUPERVISOR.workers.values():
                region = other.pool_regions.pop(segment_id, None)
                if region is not None:
                    if other.channel is not None:
                        other.channel.drop_pool(segment_id)
                    other._send(wire.DROP.pack(b"X", region))
    found = _core.shared_output_segment(address, nbytes)
    if found is None:
        return None
    segment_id, fd, base, size = found
    region = worker.pool_regions.get(segment_id)
    if region is None:
        region = worker.pool_regions[segment_id] = worker.new_region_id()
        worker._send(wire.CPU_REGION.pack(b"M", region, size), [fd])
        if worker.channel is not None:
            worker.channel.add_pool(segment_id, region)
    return region, address - base, base + size - address - nbytes if fresh else 0


def drop_dead_regions(worker) -> None:
    for base, region in list(worker.cpu_regions.items()):
        if region.storage() is None:
            del worker.cpu_regions[base]
            if worker.channel is not None:
                worker.channel.drop_storage(region.id)
            worker._send(wire.DROP.pack(b"X", region.id))


def staging_buffer(worker, size: int) -> tuple[int, int]:
    """(region id, address) of a shared buffer of at least `size` bytes."""
    if worker.staging is None or worker.staging[3] < size:
        size = max(size, 1 << 20, 2 * (worker.staging[3] if worker.staging else 0))
        fd = os.memfd_create("kreg-staging")
        os.ftruncate(fd, size)
        mapping = mmap.mmap(fd, size)
        region_id = worker.new_region_id()
        worker._send(wire.CPU_REGION.pack(b"M", region_id, size), [fd])
        os.close(fd)
        if worker.staging is not None:
            worker._send(wire.DROP.pack(b"X", worker.staging[0]))
        worker.staging = (region_id, mapping, ctypes.addressof(ctypes.c_char.from_buffer(mapping)), size)
        if worker.channel is not None:
            worker.channel.set_staging(region_id, worker.staging[2], size)
    return worker.staging[0], worker.staging[2]
