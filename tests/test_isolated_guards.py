"""Isolated CPU ops hide no overflow: a write of a few elements past the end
(or before the start) of an argument raises KernelFault naming the argument,
at sizes that end on a page (1024 floats: 4 KiB), on a power of two the
shared output pool rounds to (16384 floats: 64 KiB, 2 MiB, 16 MiB), and odd
ones; staged, pooled and shared-storage arguments alike. Good calls after a
fault give the right result, and a read past the end on a page boundary is
named too."""
from __future__ import annotations

import itertools
import os
import time

import pytest
import torch

import registry
from isolation_kernels import (read_past_end_of_x, write_before_start_of_out, write_cpu_inplace_kernel,
                               write_cpu_kernel, write_past_end_of_out, write_past_end_of_x)

_names = itertools.count()
# Odd sizes, a page (staged: under 64 KiB), the pool's smallest segment,
# 2 MiB and 16 MiB (pool segments with no slack), and pool slack.
SIZES = (1, 100, 1024, 1025, 16384, 100_000, 1 << 19, 1 << 22)


def _op(kernels_root, body):
    name = f"iso_guard_{next(_names)}"
    source = write_cpu_kernel(kernels_root, name, body)
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    return name, registry.get(name, device="cpu", isolate=True)


@pytest.mark.parametrize("k", [1, 3, 65])
def test_a_write_past_the_end_of_out_is_named(kernels_root, cache_root, k):
    name, op = _op(kernels_root, write_past_end_of_out(k))
    for n in SIZES:
        x = torch.arange(n, dtype=torch.float32)
        with pytest.raises(registry.KernelFault) as caught:
            op(x, 2.0)
        text = str(caught.value)
        assert f"the kernel wrote past the end of `out` (n = {n})" in text, f"n = {n}: {text}"
        assert f"{name}.{name} (float32, cpu)" in text and caught.value.dtype == "float32"
        assert torch.equal(x, torch.arange(n, dtype=torch.float32))


def test_a_write_before_the_start_of_out_is_named(kernels_root, cache_root):
    _, op = _op(kernels_root, write_before_start_of_out(3))
    for n in SIZES:
        with pytest.raises(registry.KernelFault, match=rf"wrote before the start of `out` \(n = {n}\)"):
            op(torch.ones(n), 2.0)


def test_a_write_past_the_end_of_an_input_is_named(kernels_root, cache_root):
    _, op = _op(kernels_root, write_past_end_of_x(1))
    for n in (100, 1024, 100_000, 1 << 22):
        with pytest.raises(registry.KernelFault, match=rf"wrote past the end of `x` \(n = {n}\)"):
            op(torch.ones(n), 2.0)


def test_a_read_past_a_page_boundary_is_named(kernels_root, cache_root):
    _, op = _op(kernels_root, read_past_end_of_x(1))
    with pytest.raises(registry.KernelFault, match=r"read past the end of `x` \(n = 1024\)"):
        op(torch.ones(1024), 2.0)
    # Within the page the read is harmless here, as it is in the normal op.
    assert torch.equal(op(torch.ones(1000), 2.0).isfinite(), torch.ones(1000, dtype=torch.bool))


def test_an_in_place_write_past_the_end_is_named(kernels_root, cache_root):
    name = f"iso_guard_{next(_names)}"
    write_cpu_inplace_kernel(kernels_root, name, 3)
    op = registry.get(name, device="cpu", isolate=True)
    for n in (100, 1024, 1 << 19):
        with pytest.raises(registry.KernelFault, match=rf"wrote past the end of `y` \(n = {n}\)"):
            op(torch.ones(n), 2.0)


def test_good_calls_around_faults_are_exact(kernels_root, cache_root):
    name = f"iso_guard_{next(_names)}"
    source = write_cpu_kernel(kernels_root, name, write_past_end_of_out(1))
    op = registry.get(name, device="cpu", isolate=True)
    normal_x = torch.randn(1 << 22)
    with pytest.raises(registry.KernelFault):
        op(normal_x, 2.0)
    from isolation_kernels import good

    write_cpu_kernel(kernels_root, name, good(0))
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    op = registry.get(name, device="cpu", isolate=True)
    normal = registry.get(name, device="cpu")
    for n in SIZES:
        x = torch.randn(n)
        for _ in range(3):  # the same memory again: its guards were restored
            assert torch.equal(op(x, 1.5), normal(x, 1.5)), n


def test_a_cuda_workers_guard_reply_names_the_argument_and_side():
    """The G reply of a CUDA worker (core/ring_worker.cc) in the words of a CPU overrun."""
    from registry.isolation import guards

    class Tensor:
        numel = 4096

    names, params = ["out", "x"], [Tensor(), Tensor()]
    assert guards.from_reply(b"G0 after", names, params) == "the kernel wrote past the end of `out` (n = 4096)"
    assert guards.from_reply(b"G1 before", names, params) == "the kernel wrote before the start of `x` (n = 4096)"
    assert "the worker said" in guards.from_reply(b"Gnonsense", names, params)
