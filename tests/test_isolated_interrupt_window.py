"""Ctrl-C before an isolated call is waiting still ends it. Python raises
KeyboardInterrupt at the next bytecode after SIGINT; when that bytecode is a
finalizer's (the garbage collector runs them at any allocation, a worker's
start allocates plenty), the exception is printed as ignored and dropped.
Here the interrupt comes exactly so, while the worker starts: the call must
still raise KeyboardInterrupt at once, not wait for the hanging worker."""
from __future__ import annotations

import itertools
import os
import signal
import time

import pytest
import torch

import registry
from isolation_kernels import CPU_FAULTS, good, write_cpu_kernel
from registry.isolation import launch_env

_names = itertools.count()


class _InterruptInAFinalizer:
    """Sends SIGINT to this process from its __del__: the KeyboardInterrupt is
    raised inside the finalizer, where Python ignores it."""

    sent: list[float] = []

    def __del__(self):
        self.sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100):  # a backward jump: Python runs the signal handler here
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped one, on purpose
def test_an_interrupt_swallowed_while_the_worker_starts_still_ends_the_call(kernels_root, cache_root, monkeypatch):
    monkeypatch.setenv("REGISTRY_ISOLATE_TIMEOUT", "8")
    name = f"iso_window_{next(_names)}"
    write_cpu_kernel(kernels_root, name, CPU_FAULTS["endless loop"])
    op = registry.get(name, device="cpu", isolate=True)
    command = launch_env.command

    def command_with_a_finalizer(flavor):
        _InterruptInAFinalizer()  # freed at once: its __del__ runs here, during the worker's start
        return command(flavor)

    monkeypatch.setattr(launch_env, "command", command_with_a_finalizer)
    from registry.isolation.supervisor import SUPERVISOR

    SUPERVISOR.shutdown()  # the call must start a worker: one an earlier test left running would serve it
    _InterruptInAFinalizer.sent.clear()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        op(torch.ones(4), 1.0)
    ended = time.perf_counter()
    assert _InterruptInAFinalizer.sent, "the worker did not start through the hook"
    assert ended - start <= 1.5, f"the call ended {ended - start:.2f} s after an interrupt sent at its start"
    monkeypatch.setattr(launch_env, "command", command)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is restored
    source = write_cpu_kernel(kernels_root, name, good(5))
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    x = torch.ones(4)
    assert torch.equal(registry.get(name, device="cpu", isolate=True)(x, 2.0), 2.0 * x + 5)
