"""The call channel of a plain CPU worker (core/call_ring.h,
core/isolated_call.h): after a call has sent the worker what it needs, calls
go through the channel without Python and give the normal op's bits; every
fault, a hang, a worker killed from outside and Ctrl-C that come on that path
are reported as on the Python one; an idle worker sleeps."""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time

import pytest
import torch

import registry
from isolation_kernels import cuda_worker_with_channel, good, write_cpu_kernel
from registry.isolation.supervisor import SUPERVISOR

_names = itertools.count()

# Bodies that fault only when a < 0: a call with a >= 0 first sets the fast path up.
WHEN_NEGATIVE = {
    "SIGSEGV": "  if (a < 0) *static_cast<volatile float*>(nullptr) = a;",
    "SIGABRT": "  if (a < 0) std::abort();",
    "wrote past the end of `out` (n = {n})": "  if (a < 0) os[out.numel] = a;",
    "wrote past the end of `x` (n = {n})": "  if (a < 0) const_cast<float*>(xs)[x.numel] = a;",
    "read past the end of `x` (n = {n})": "  if (a < 0) os[0] = static_cast<const volatile float*>(xs)[x.numel];",
    "did not return within 0.5 s": "  if (a < 0) for (;;) asm volatile(\"\");",
}


def _op(kernels_root, fault: str):
    name = f"iso_channel_{next(_names)}"
    write_cpu_kernel(kernels_root, name, fault + "\n" + good(0))
    return registry.get(name, device="cpu", isolate=True), registry.get(name, device="cpu")


def _channel():
    worker = SUPERVISOR.workers.get(("plain", "cpu"))
    return worker.channel if worker is not None else None


def _warm(op, x):
    """Calls until the fast path takes the call (the first sends the worker its memory)."""
    for _ in range(3):
        op(x, 1.0)
    posts = _channel().posts
    op(x, 1.0)
    assert _channel().posts == posts + 1, "the call did not go through the channel's fast path"


@pytest.mark.parametrize("n", [1, 1000, 100_000, 1 << 20])
def test_calls_skip_python_and_match_the_normal_op(kernels_root, cache_root, n):
    op, normal = _op(kernels_root, "")
    x = torch.randn(n)
    _warm(op, x)
    worker = SUPERVISOR.workers[("plain", "cpu")]
    python_calls, calls = worker._calls, worker.calls
    for a in (0.5, -1.25, 3.0):
        assert torch.equal(op(x, a), normal(x, a)), (n, a)
    assert worker._calls == python_calls and worker.calls == calls + 3
    assert f"{calls + 3} calls" in str(registry.status(op.kernel, device="cpu"))


@pytest.mark.parametrize("what", list(WHEN_NEGATIVE))
def test_a_fault_on_the_fast_path_is_reported(kernels_root, cache_root, what):
    op, _ = _op(kernels_root, WHEN_NEGATIVE[what])
    n = 1024 if "read past" in what else 100  # a read is caught by the guard page after a full page
    x = torch.arange(n, dtype=torch.float32)
    _warm(op, x)
    posts = _channel().posts
    with pytest.raises(registry.KernelFault) as caught:
        op.call(x, -1.0, timeout=0.5)
    assert _channel() is None or _channel().posts == posts  # the worker was replaced
    assert what.format(n=n) in str(caught.value), str(caught.value)
    assert torch.equal(x, torch.arange(n, dtype=torch.float32))
    assert torch.equal(op(x, 2.0), 2.0 * x)  # a new worker


def test_a_worker_killed_mid_call_is_seen(kernels_root, cache_root):
    op, _ = _op(kernels_root, WHEN_NEGATIVE["did not return within 0.5 s"])
    x = torch.ones(8)
    _warm(op, x)
    pid = SUPERVISOR.workers[("plain", "cpu")].process.pid
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    start = time.perf_counter()
    with pytest.raises(registry.KernelFault, match="SIGKILL"):
        op.call(x, -1.0, timeout=60)
    assert time.perf_counter() - start < 1.5


def test_ctrl_c_ends_a_call_on_the_fast_path(kernels_root, cache_root, monkeypatch):
    monkeypatch.setenv("REGISTRY_ISOLATE_TIMEOUT", "60")
    op, _ = _op(kernels_root, WHEN_NEGATIVE["did not return within 0.5 s"])
    x = torch.ones(8)
    _warm(op, x)
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        op(x, -1.0)
    assert time.perf_counter() - start < 1.5
    assert torch.equal(op(x, 2.0), 2.0 * x)


def test_an_idle_worker_sleeps(kernels_root, cache_root):
    op, _ = _op(kernels_root, "")
    x = torch.ones(8)
    _warm(op, x)
    pid = SUPERVISOR.workers[("plain", "cpu")].process.pid

    def cpu_seconds() -> float:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    time.sleep(0.05)  # past the worker's spin
    before = cpu_seconds()
    time.sleep(0.5)
    assert cpu_seconds() - before < 0.05
    assert torch.equal(op(x, 2.0), 2.0 * x)  # and wakes for the next call


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_calls_keep_the_socket_with_the_channel_turned_off(cache_root, monkeypatch):
    """REGISTRY_ISOLATE_CUDA_CHANNEL=0: a CUDA worker without a call channel, same results."""
    with cuda_worker_with_channel(monkeypatch, "0"):
        op = registry.get("axpy", device="cuda", isolate=True)
        x = torch.arange(1000, dtype=torch.float32, device="cuda")
        for _ in range(3):
            assert torch.equal(op(x, x, 2.0), registry.get("axpy", device="cuda")(x, x, 2.0))
        assert SUPERVISOR.workers[("plain", "cuda")].channel is None


MIX_TOML = """format = 1
description = "every scalar kind a launcher takes"

[cpu]
sources = ["kernel.cpp"]

[[op]]
signature = "{name}(Tensor x, int[] dims, bool flip, ScalarType? kind, int k, float a) -> Tensor"
dtypes = ["float32", "float64"]
"""

MIX_SOURCE = """#include "kreg/abi.h"
template <typename T, typename F>
static const char* run(kreg_tensor out, kreg_tensor x, kreg_int_list dims, bool flip, int32_t kind, int64_t k, F a) {
  int64_t sum = 0;
  for (int64_t i = 0; i < dims.size; ++i) sum += dims.data[i] * (i + 1);
  for (int64_t i = 0; i < out.numel; ++i)
    out.data == nullptr ? (void)0 : (void)(static_cast<T*>(out.data)[i] =
        static_cast<const T*>(x.data)[i] * T(a) * T(flip ? -1 : 1) + T(sum) + T(kind) + T(k));
  return nullptr;
}
KREG_API const char* NAME_f32(kreg_tensor out, kreg_tensor x, kreg_int_list dims, bool flip, int32_t kind,
                              int64_t k, float a, void*) { return run<float>(out, x, dims, flip, kind, k, a); }
KREG_API const char* NAME_f64(kreg_tensor out, kreg_tensor x, kreg_int_list dims, bool flip, int32_t kind,
                              int64_t k, double a, void*) { return run<double>(out, x, dims, flip, kind, k, a); }
"""


def test_every_parameter_kind_crosses_the_fast_path(kernels_root, cache_root):
    name = f"iso_mix_{next(_names)}"
    folder = kernels_root / name
    folder.mkdir()
    (folder / "kernel.toml").write_text(MIX_TOML.format(name=name))
    (folder / "kernel.cpp").write_text(MIX_SOURCE.replace("NAME", name))
    op, normal = registry.get(name, device="cpu", isolate=True), registry.get(name, device="cpu")
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(37, dtype=dtype)
        for _ in range(2):  # the first sends the worker its memory
            op(x, [1], False, None, 0, 1.0)
        posts = _channel().posts
        calls = [(x, [], True, None, -3, 0.1), (x, [2, -5, 7], False, torch.float16, 4, 1e-3),
                 (x, list(range(40)), True, torch.int64, 1 << 40, -2.5), (x[:0], [1], False, None, 0, 1.0),
                 (torch.randn((), dtype=dtype), [3], True, torch.bool, 2, 0.3)]
        for args in calls:
            assert torch.equal(op(*args), normal(*args)), (dtype, args[1:])
        assert _channel().posts == posts + 4, "a call did not take the fast path"  # x[:0]: no launcher call
