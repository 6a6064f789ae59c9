"""An isolated CPU op's large outputs are allocated where its worker writes
them in place (core/shared_output_pool.h): nothing is staged or copied back,
the memory is reused call after call, and small outputs (cheaper to copy)
are staged as before. Arguments likewise: a page or more moves into shared
memory once, anything smaller is staged."""
from __future__ import annotations

import gc

import torch

import registry
from registry import _core
from registry.isolation.supervisor import SUPERVISOR

N = 1 << 18  # 1 MiB of float32: over the pool's minimum


def _worker():
    return SUPERVISOR.workers[("plain", "cpu")]


def test_a_large_output_is_written_in_place_and_its_memory_reused(cache_root):
    normal = registry.get("axpy", device="cpu")
    isolated = registry.get("axpy", device="cpu", isolate=True)
    x, y = torch.randn(N), torch.randn(N)
    out = isolated(x, y, 2.0)
    assert torch.equal(out, normal(x, y, 2.0))
    assert _core.shared_output_segment(out.data_ptr(), out.numel() * 4) is not None, "not from the pool"
    worker = _worker()
    staged, calls = worker.staged_bytes, worker.calls
    again = isolated(x, y, 3.0)
    assert worker.calls == calls + 1 and worker.staged_bytes == staged, "a pool output was staged"
    assert torch.equal(again, normal(x, y, 3.0))
    address = again.data_ptr()
    del again
    gc.collect()
    third = isolated(x, y, 4.0)
    assert third.data_ptr() == address  # the released segment, reused
    assert _core.shared_output_segment(address, 4) is not None and torch.equal(third, normal(x, y, 4.0))


def test_a_small_output_is_staged_and_right(cache_root):
    normal = registry.get("axpy", device="cpu")
    isolated = registry.get("axpy", device="cpu", isolate=True)
    x, y = torch.randn(100), torch.randn(100)
    out = isolated(x, y, 2.0)
    assert _core.shared_output_segment(out.data_ptr(), 400) is None
    assert torch.equal(out, normal(x, y, 2.0))
    assert _worker().staged_bytes > 0


def test_normal_ops_never_use_the_pool(cache_root):
    normal = registry.get("axpy", device="cpu")
    out = normal(torch.randn(N), torch.randn(N), 2.0)
    assert _core.shared_output_segment(out.data_ptr(), 4) is None


def _shared(worker, tensor) -> bool:
    region = worker.cpu_regions.get(tensor.data_ptr())
    return region is not None and region.storage() is not None


def test_arguments_of_a_page_or_more_are_shared_once_and_smaller_ones_staged(cache_root):
    normal = registry.get("axpy", device="cpu")
    isolated = registry.get("axpy", device="cpu", isolate=True)
    small_x, small_y = torch.randn(100), torch.randn(100)
    isolated(small_x, small_y, 2.0)  # the worker's start
    worker = _worker()
    staged = worker.staged_bytes
    assert torch.equal(isolated(small_x, small_y, 3.0), normal(small_x, small_y, 3.0))
    assert not _shared(worker, small_x) and not _shared(worker, small_y), "a 400-byte argument was shared"
    assert worker.staged_bytes > staged
    big_x, big_y = torch.randn(N), torch.randn(N)
    assert torch.equal(isolated(big_x, big_y, 2.0), normal(big_x, big_y, 2.0))
    assert _shared(worker, big_x) and _shared(worker, big_y), "a 1 MiB argument's storage was not shared"
    regions, staged = dict(worker.cpu_regions), worker.staged_bytes
    for a in (3.0, 4.0):
        assert torch.equal(isolated(big_x, big_y, a), normal(big_x, big_y, a))
        # A view into a shared storage: the same region, found by the full check.
        assert torch.equal(isolated(big_x[7:], big_y[7:], a), normal(big_x[7:], big_y[7:], a))
    assert worker.cpu_regions == regions and worker.staged_bytes == staged, "shared again, or staged"
