"""Isolated ops on CUDA: real device faults (illegal and misaligned
addresses, a trap, a device-side assert, a hang) raise KernelFault, and the
parent's CUDA context keeps working (a torch op right after each fault);
a checked build names the file:line of an out-of-bounds write."""
from __future__ import annotations

import itertools
import os
import re
import time

import pytest
import torch

import registry
from isolation_kernels import (CUDA_CHECKED_WRITE, CUDA_FAULTS, cuda_good, cuda_worker_with_channel,
                               cuda_write_past_end, write_cuda_inplace_kernel, write_cuda_kernel)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

_names = itertools.count()
HANG_TIMEOUT = 3.0

SCRIPT = [("good", 1), ("fault", "write far past the end"), ("good", 2), ("fault", "read out of bounds"),
          ("good", 3), ("good", 4), ("fault", "null pointer"), ("good", 5), ("good", 6),
          ("fault", "misaligned vector access"), ("good", 7), ("good", 8), ("fault", "device trap"),
          ("good", 9), ("good", 10), ("fault", "endless loop"), ("good", 11), ("good", 12),
          ("fault", "device-side assert"), ("good", 13)]

EXPECTED = {"write far past the end": "illegal", "read out of bounds": "illegal", "null pointer": "illegal",
            "misaligned vector access": "misaligned", "device trap": "", "device-side assert": "assert",
            "endless loop": "did not return within 3 s"}


def _edit(root, name, body):
    source = write_cuda_kernel(root, name, body)
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    return source


def test_twenty_edits_on_cuda_keep_the_parent_context(kernels_root, cache_root, monkeypatch):
    monkeypatch.setenv("REGISTRY_ISOLATE_TIMEOUT", str(HANG_TIMEOUT))
    name = f"iso_cuda_{next(_names)}"
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    faults = 0
    for kind, what in SCRIPT:
        _edit(kernels_root, name, cuda_good(what) if kind == "good" else CUDA_FAULTS[what])
        op = registry.get(name, device="cuda", isolate=True)
        if kind == "good":
            assert torch.equal(op(x, 3.0), 3.0 * x + what), f"edit {what}: wrong result"
            continue
        start = time.perf_counter()
        with pytest.raises(registry.KernelFault) as caught:
            op(x, 3.0)
        took = time.perf_counter() - start
        fault = caught.value
        assert fault.op == name and fault.backend == "cuda" and name in str(fault)
        assert EXPECTED[what] in str(fault).lower() or EXPECTED[what] in str(fault), str(fault)
        assert took <= (HANG_TIMEOUT + 1.0 if what == "endless loop" else 2.0), f"{what}: {took:.2f} s"
        # The parent's context works: a torch op right after the fault.
        assert float((x * 2).sum()) == float(2 * x.double().sum())
        faults += 1
    assert faults == 7


def test_checked_cuda_out_of_bounds_names_the_line(kernels_root, cache_root):
    name = f"iso_cuda_checked_{next(_names)}"
    body, line = CUDA_CHECKED_WRITE
    source = _edit(kernels_root, name, body)
    op = registry.get(name, device="cuda", checked=True)
    # 250 elements in one block of 256 threads: thread 250 exists and writes one past the end.
    x = torch.arange(250, dtype=torch.float32, device="cuda")
    start = time.perf_counter()
    with pytest.raises(registry.KernelFault) as caught:
        op(x, 2.0)
    assert time.perf_counter() - start <= 30.0
    fault = caught.value
    assert fault.diagnostics and (fault.diagnostics[0].file, fault.diagnostics[0].line) == (str(source), line), \
        f"{fault}\n{fault.log[-3000:]}"
    assert "out-of-bounds write" in fault.access
    assert float(x.sum()) == float(torch.arange(250.0).sum())
    _edit(kernels_root, name, "  if (i < n) os[i] = a * xs[i];")
    assert torch.equal(registry.get(name, device="cuda", checked=True)(x, 2.0), 2.0 * x)


@pytest.mark.parametrize("k", [1, 3])
def test_checked_cuda_names_a_write_just_past_the_end_at_any_size(kernels_root, cache_root, k):
    """Exact multiples of the allocation granularity (512 bytes, 2 MiB) and
    16 KiB, where the worker's copies of out and x sit back to back without
    memcheck's padding, and an odd size."""
    name = f"iso_cuda_checked_{next(_names)}"
    body, line = cuda_write_past_end(k)
    source = _edit(kernels_root, name, body)
    op = registry.get(name, device="cuda", checked=True)
    for n in (128, 4096, 1 << 19, 1000):
        x = torch.ones(n, device="cuda")
        with pytest.raises(registry.KernelFault) as caught:
            op(x, 2.0)
        fault = caught.value
        assert "out-of-bounds write" in fault.access, f"n = {n}: {fault}\n{fault.log[-3000:]}"
        assert fault.diagnostics and (fault.diagnostics[0].file, fault.diagnostics[0].line) == (str(source), line), \
            f"n = {n}: {fault}"
        assert "after the end of argument 'out'" in fault.relative, f"n = {n}: {fault.relative}\n{fault.log[-3000:]}"


def test_isolated_cuda_results_and_stream_order(cache_root):
    normal = registry.get("axpy", device="cuda")
    isolated = registry.get("axpy", device="cuda", isolate=True)
    stream = torch.cuda.Stream()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(1 << 20, device="cuda", dtype=dtype)
        y = torch.randn(1 << 20, device="cuda", dtype=dtype)
        with torch.cuda.stream(stream):
            y2 = y * 2  # queued on the side stream right before the call: the call must see it
            got = isolated(x, y2, 1.5)
            expected = normal(x, y2, 1.5)
        stream.synchronize()
        assert torch.equal(got, expected), dtype
        view = x[1:]  # misaligned for vectors: the scalar path, through an offset in the IPC allocation
        assert torch.equal(isolated(view, y[1:], 0.5), normal(view, y[1:], 0.5))


def test_memory_ipc_cannot_share_is_staged_and_status_says_so(cache_root, tmp_path):
    """With expandable segments torch maps memory that cuIpcGetMemHandle refuses:
    the call stages it through device copies, gives the same result, and
    registry.status() says so (a fresh process: the allocator setting is read once)."""
    import subprocess
    import sys

    script = tmp_path / "staged.py"
    script.write_text(
        "import torch, registry\n"
        "x = torch.randn(4097, device='cuda'); y = torch.randn(4097, device='cuda')\n"
        "normal = registry.get('axpy', device='cuda'); isolated = registry.get('axpy', device='cuda', isolate=True)\n"
        "assert torch.equal(isolated(x, y, 0.5), normal(x, y, 0.5))\n"
        "print(registry.status('axpy', device='cuda'))\n")
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "through device copies" in done.stdout and "cuIpcGetMemHandle refused" in done.stdout, done.stdout


def test_an_isolated_op_whose_device_code_is_a_cubin_launches_it(cache_root):
    """The worker binds the cubin into its copy of the launcher library, as the
    parent does (kreg_bind_device_module), and launches from its own context."""
    normal = registry.get("axpy_nvrtc", device="cuda")
    isolated = registry.get("axpy_nvrtc", device="cuda", isolate=True)
    x = torch.randn(4097, device="cuda")
    y = torch.randn(4097, device="cuda")
    assert torch.equal(isolated(x, y, 1.5), normal(x, y, 1.5))



@pytest.fixture
def cuda_channel(monkeypatch):
    """A CUDA worker started by the test itself, with the call channel on
    (the default; set here so that a REGISTRY_ISOLATE_CUDA_CHANNEL=0 in the
    environment does not turn these tests into socket tests)."""
    with cuda_worker_with_channel(monkeypatch, "1"):
        yield


def test_isolated_cuda_calls_take_the_call_channel(kernels_root, cache_root, cuda_channel):
    """After its first call, an isolated CUDA op's calls are written into the
    worker's call channel by C++ (core/isolated_call.h) and run by the
    worker's C++ loop: bit for bit the normal op's, in stream order."""
    from registry.isolation.supervisor import SUPERVISOR

    name = f"iso_cuda_{next(_names)}"
    _edit(kernels_root, name, cuda_good(1))
    normal = registry.get(name, device="cuda")
    isolated = registry.get(name, device="cuda", isolate=True)
    x = torch.randn(4099, device="cuda")
    isolated(x, 0.5)  # the first call sends the worker its launcher and memory
    channel = SUPERVISOR.workers[("plain", "cuda")].channel
    before = channel.calls
    for k in range(50):
        x2 = x * k  # queued on the current stream just before: the call must see it
        assert torch.equal(isolated(x2, 0.25 * k), normal(x2, 0.25 * k)), k
    # An output in a segment the caching allocator just made goes through Python once (its IPC handle).
    assert channel.calls - before >= 45, f"{channel.calls - before} of 50 calls went through the call channel"


def test_a_device_fault_on_the_call_channel_is_a_kernel_fault(kernels_root, cache_root, cuda_channel):
    """A kernel that faults only on some calls: the faulting call comes through
    the channel's fast path (the op's memory is already mapped), is a
    KernelFault, and the next call runs in a new worker."""
    from registry.isolation.supervisor import SUPERVISOR

    name = f"iso_cuda_{next(_names)}"
    _edit(kernels_root, name, "  if (a == 13.0f && i < n) os[i + (int64_t(1) << 40)] = xs[i];\n"
                              "  else if (i < n) os[i] = a * xs[i];")
    op = registry.get(name, device="cuda", isolate=True)
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    assert torch.equal(op(x, 2.0), 2.0 * x)
    worker = SUPERVISOR.workers[("plain", "cuda")]
    calls = worker.channel.calls
    with pytest.raises(registry.KernelFault) as caught:
        op(x, 13.0)
    assert "illegal" in str(caught.value).lower() and caught.value.backend == "cuda"
    assert worker.channel.calls == calls + 1, "the faulting call did not take the channel's fast path"
    assert not worker.alive()
    assert torch.equal(op(x, 3.0), 3.0 * x)
    assert float((x * 2).sum()) == float(2 * x.double().sum())


def test_cpu_and_cuda_workers_each_have_a_channel_used_side_by_side(kernels_root, cache_root, cuda_channel):
    """One process, both backends isolated: each worker's calls go through its
    own channel (the fast path finds a slot's channel by its generation)."""
    from registry.isolation.supervisor import SUPERVISOR

    name = f"iso_cuda_{next(_names)}"
    _edit(kernels_root, name, cuda_good(2))
    normal = {"cpu": registry.get("axpy", device="cpu"), "cuda": registry.get(name, device="cuda")}
    isolated = {"cpu": registry.get("axpy", device="cpu", isolate=True), "cuda": registry.get(name, device="cuda",
                                                                                           isolate=True)}
    x = {d: torch.arange(1000, dtype=torch.float32, device=d) for d in ("cpu", "cuda")}
    args = {"cpu": lambda k: (x["cpu"], x["cpu"], float(k)), "cuda": lambda k: (x["cuda"], float(k))}
    for d in ("cpu", "cuda"):
        isolated[d](*args[d](1))  # each worker gets its launcher and memory
    channels = {d: SUPERVISOR.workers[("plain", d)].channel for d in ("cpu", "cuda")}
    assert channels["cpu"].generation != channels["cuda"].generation
    before = {d: channels[d].calls for d in channels}
    for k in range(10):
        for d in ("cpu", "cuda"):
            assert torch.equal(isolated[d](*args[d](k)), normal[d](*args[d](k))), (d, k)
    through = {d: channels[d].calls - before[d] for d in channels}
    assert through["cpu"] == 10 and through["cuda"] >= 8, through  # a new CUDA segment: once through Python


def _bytes_allocated_so_far() -> int:
    """Bytes the caching allocator has handed out in this process, ever."""
    return torch.cuda.memory_stats()["allocated_bytes.all.allocated"]


@pytest.mark.parametrize("k", [1, 3])
def test_plain_isolation_names_a_write_just_past_the_end_of_an_output(kernels_root, cache_root, cuda_channel, k):
    """No sanitizer: the binding leaves padding after an isolated CUDA op's
    output and the worker keeps canaries there. A write of k elements past
    the end is a KernelFault naming `out`, at exact multiples of the 512-byte
    and 2 MiB allocation granularities, at 16 KiB and at an odd size; the
    next call runs, and the op's outputs are the normal op's."""
    name = f"iso_cuda_guard_{next(_names)}"
    body, _ = cuda_write_past_end(k)
    _edit(kernels_root, name, body)
    op = registry.get(name, device="cuda", isolate=True)
    for n in (128, 4096, 1 << 19, 1000):
        x = torch.ones(n, device="cuda")
        with pytest.raises(registry.KernelFault) as caught:
            op(x, 2.0)
        assert "wrote past the end of `out`" in str(caught.value) and f"n = {n}" in str(caught.value), \
            f"n = {n}: {caught.value}"
        assert float(x.sum()) == n  # the parent's tensors and context are untouched
    good = f"iso_cuda_guard_{next(_names)}"
    _edit(kernels_root, good, cuda_good(1))
    normal, isolated = registry.get(good, device="cuda"), registry.get(good, device="cuda", isolate=True)
    for n in (128, 1 << 19, 1000):
        x = torch.randn(n, device="cuda")
        isolated(x, 0.5)  # the worker maps the memory first
        before = _bytes_allocated_so_far()
        out = isolated(x, 0.5)
        # The padding the canaries sit in (torch 2.11 wraps an output from
        # DLPack, whose storage is the tensor's alone: the allocator tells).
        # Counted as handed out, not as in use: a tensor of an earlier test
        # that the garbage collector frees meanwhile does not count.
        assert _bytes_allocated_so_far() - before >= 4 * n + 64, (n, _bytes_allocated_so_far() - before)
        assert torch.equal(out, normal(x, 0.5)) and out.shape == (n,) and out.is_contiguous()
        del out  # not freed while the next size is measured


@pytest.mark.parametrize("k", [1, 3, -2])
def test_plain_isolation_names_a_stray_write_around_an_in_place_argument(kernels_root, cache_root, cuda_channel, k):
    """No sanitizer: an argument written in place (Tensor(a!)) has other data
    around it, so the worker watches the bytes on each side. A write of k
    elements past its end (k < 0: before its start) is a KernelFault naming
    `y`, whether the neighbour is the rest of the same allocation or the next
    block of the allocator, at exact multiples of the 512-byte and 2 MiB
    granularities, at 16 KiB and at an odd size; the neighbour holds what it
    held before (the worker writes it back), which the normal op cannot say."""
    name = f"iso_cuda_inplace_{next(_names)}"
    write_cuda_inplace_kernel(kernels_root, name, k)
    op = registry.get(name, device="cuda", isolate=True)
    words = "wrote past the end of `y`" if k > 0 else "wrote before the start of `y`"
    for n in (128, 4096, 1 << 19, 1000):
        block = torch.full((n + 8192,), 7.0, device="cuda")
        y = block[4096:4096 + n]  # neighbours on both sides within one allocation
        with pytest.raises(registry.KernelFault) as caught:
            op(y, 2.0)
        assert words in str(caught.value) and f"n = {n}" in str(caught.value), f"n = {n}: {caught.value}"
        assert float(block[:4096].sum()) == 7.0 * 4096 and float(block[4096 + n:].sum()) == 7.0 * 4096, n
    for n in (4096, 1 << 19):  # its own block of the caching allocator, between two others
        before, y, after = _three_adjacent_blocks(n)
        with pytest.raises(registry.KernelFault, match=re.escape(words)):
            op(y, 2.0)
        assert float(before.sum()) == 7.0 * n and float(after.sum()) == 7.0 * n, n


def _three_adjacent_blocks(n: int) -> list[torch.Tensor]:
    """Three tensors of n floats (4n bytes, a multiple of the allocator's 512),
    each its own block, one right after another: found among tensors made in
    a row, once the allocator's holes are filled. (Three tensors made in a row
    may start a segment or end one, where a stray write meets memory the
    worker does not watch: another segment of yours, or nothing it mapped.)"""
    made = [torch.full((n,), 7.0, device="cuda") for _ in range(24)]
    for k in range(len(made) - 2):
        addresses = [t.data_ptr() for t in made[k:k + 3]]
        if addresses == [addresses[0], addresses[0] + 4 * n, addresses[0] + 8 * n]:
            return made[k:k + 3]  # the others are freed: the three stay where they are
    raise AssertionError(f"no three blocks of {4 * n} bytes in a row among 24: {[t.data_ptr() for t in made]}")


def test_an_in_place_op_in_bounds_is_the_normal_op_bit_for_bit(kernels_root, cache_root, cuda_channel):
    """The watched bytes cost nothing in results: a good in-place kernel,
    through the call channel, leaves its argument as the normal op does, its
    neighbours untouched."""
    from registry.isolation.supervisor import SUPERVISOR

    name = f"iso_cuda_inplace_{next(_names)}"
    write_cuda_inplace_kernel(kernels_root, name, 0)
    normal = registry.get(name, device="cuda")
    isolated = registry.get(name, device="cuda", isolate=True)
    x = torch.randn(3 * 4099, device="cuda")
    isolated(x[4099:8198], 1.0)  # the first call sends the worker its launcher and memory
    channel = SUPERVISOR.workers[("plain", "cuda")].channel
    calls = channel.calls
    for k in range(20):
        expected, got = x.clone(), x.clone()
        normal(expected[4099:8198], 0.5 + k)
        isolated(got[4099:8198], 0.5 + k)
        assert torch.equal(got, expected), k
    assert channel.calls - calls >= 15, f"{channel.calls - calls} of 20 calls went through the call channel"
