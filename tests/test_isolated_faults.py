"""Isolated ops on the CPU: real faulty kernels raise KernelFault and the
process lives; good edits after a fault give the right result; a hang ends
at the timeout; Ctrl-C ends a hanging call within a second."""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time

import pytest
import torch

import registry
from isolation_kernels import CPU_FAULTS, good, write_cpu_kernel

_names = itertools.count()

# 20 edits: 14 good, 6 faulty, a fault never twice in a row.
SCRIPT = [("good", 1), ("fault", "write far past the end"), ("good", 2), ("good", 3),
          ("fault", "read out of bounds"), ("good", 4), ("good", 5), ("fault", "null pointer"),
          ("good", 6), ("good", 7), ("fault", "abort"), ("good", 8), ("good", 9),
          ("fault", "endless loop"), ("good", 10), ("good", 11), ("fault", "integer division by zero (SIGFPE)"),
          ("good", 12), ("good", 13), ("good", 14)]
HANG_TIMEOUT = 1.0

# What the exception says for each fault (the worker's death, in words).
EXPECTED = {"write far past the end": "SIGSEGV", "read out of bounds": "SIGSEGV", "null pointer": "SIGSEGV",
            "abort": "SIGABRT", "endless loop": "did not return within 1 s",
            "integer division by zero (SIGFPE)": "SIGFPE"}


def test_twenty_edits_of_one_kernel(kernels_root, cache_root, monkeypatch):
    monkeypatch.setenv("REGISTRY_ISOLATE_TIMEOUT", str(HANG_TIMEOUT))
    name = f"iso_edit_{next(_names)}"
    source = None
    x = torch.arange(64, dtype=torch.float32)
    faults, goods = 0, 0
    assert sum(kind == "good" for kind, _ in SCRIPT) == 14 and len(SCRIPT) == 20
    for kind, what in SCRIPT:
        source = write_cpu_kernel(kernels_root, name, good(what) if kind == "good" else CPU_FAULTS[what])
        os.utime(source, ns=(time.time_ns(), time.time_ns()))
        op = registry.get(name, device="cpu", isolate=True)
        start = time.perf_counter()
        if kind == "good":
            assert torch.equal(op(x, 3.0), 3.0 * x + what), f"edit {what}: wrong result"
            goods += 1
            continue
        with pytest.raises(registry.KernelFault) as caught:
            op(x, 3.0)
        took = time.perf_counter() - start
        fault = caught.value
        assert isinstance(fault, registry.RegistryError)
        assert fault.kernel == name and fault.op == name and fault.dtype == "float32"
        assert name in str(fault) and EXPECTED[what] in str(fault), str(fault)
        limit = HANG_TIMEOUT + 1.0 if what == "endless loop" else 2.0
        assert took <= limit, f"{what}: {took:.2f} s from the call to the exception"
        faults += 1
        assert torch.equal(x, torch.arange(64, dtype=torch.float32))  # the caller's tensor is untouched
    assert (faults, goods) == (6, 14)


def test_interrupt_ends_a_hanging_call_within_a_second(kernels_root, cache_root, monkeypatch):
    monkeypatch.setenv("REGISTRY_ISOLATE_TIMEOUT", "60")
    name = f"iso_hang_{next(_names)}"
    write_cpu_kernel(kernels_root, name, CPU_FAULTS["endless loop"])
    op = registry.get(name, device="cpu", isolate=True)
    x = torch.ones(4)
    sent = []

    def interrupt():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        op(x, 1.0)
    ended = time.perf_counter()
    timer.join()
    assert ended - sent[0] <= 1.0, f"the call ended {ended - sent[0]:.2f} s after the interrupt"
    # The hanging worker is gone and a good edit runs in a new one.
    source = write_cpu_kernel(kernels_root, name, good(5))
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    assert torch.equal(registry.get(name, device="cpu", isolate=True)(x, 2.0), 2.0 * x + 5)


def test_per_call_timeout_overrides_the_knob(kernels_root, cache_root, monkeypatch):
    monkeypatch.setenv("REGISTRY_ISOLATE_TIMEOUT", "60")
    name = f"iso_timeout_{next(_names)}"
    write_cpu_kernel(kernels_root, name, CPU_FAULTS["endless loop"])
    op = registry.get(name, device="cpu", isolate=True)
    start = time.perf_counter()
    with pytest.raises(registry.KernelFault, match="did not return within 0.5 s"):
        op.call(torch.ones(2), 1.0, timeout=0.5)
    assert time.perf_counter() - start <= 1.5


def test_knob_isolates_every_get(kernels_root, cache_root, monkeypatch):
    name = f"iso_knob_{next(_names)}"
    write_cpu_kernel(kernels_root, name, CPU_FAULTS["null pointer"])
    monkeypatch.setenv("REGISTRY_ISOLATE", "1")
    op = registry.get(name, device="cpu")
    with pytest.raises(registry.KernelFault, match="SIGSEGV"):
        op(torch.ones(2), 1.0)
    monkeypatch.setenv("REGISTRY_ISOLATE", "0")
    assert "isolated" not in repr(registry.get(name, device="cpu"))
