"""Everything this process has loaded, owned by one object.

A loaded library, a registered binding or a pinned cache entry lives as long
as the process (an old op handle, or a graph torch.compile traced, may still
call its code), so none of it is ever dropped; keeping it in one place makes
that rule visible and gives tests one thing to look at.

    kernels       (name, backend) -> kernel_status.KernelState: op handles, stamps, status
    requests      (name, device as asked: None, "cpu", "cuda") -> the state it resolved to,
                  so the hot path of `get` finds it in one dict lookup. "No device" and
                  the device it means must find the same state, or one kernel gets two
                  handles and the one not asked for again runs old code: keep() moves
                  every way of asking that resolved to a backend to its new state.
    libraries     kernel-lib key -> the dlopen'ed library (ctypes.CDLL)
    modules       module key -> a hand-written pybind module
    namespaces    binding namespace -> the file registered. Loading a second file that
                  registers the same TORCH_LIBRARY namespace aborts the process, so a
                  namespace registered here is never built or loaded again.
    fast_entries  binding namespace -> its fast entry (core/fast_entry.h), or None
    pins          _core.PinSet: the cache entries loaded (cache gc leaves them alone)
    retired_tables   launcher tables an Op handle used before a swap (op.py): a graph
                     compiled earlier may still pass their address
    torch_libraries  namespace -> torch.library.Library (torch_ops.py), kept alive
    torch_handles    (kernel, op) -> backend -> Op behind torch.ops.<kernel>.<op>
    faked_namespaces, fakes_by_table   the Meta kernels of bindings (torch_ops.py)
    device_modules   cubin key -> CUmodule (device_module.py)
"""
from __future__ import annotations

import threading

from registry import _core


class ProcessState:
    def __init__(self):
        self.kernels: dict = {}
        self.requests: dict = {}
        self.libraries: dict[str, object] = {}
        self.modules: dict[str, object] = {}
        self.namespaces: dict[str, str] = {}
        self.fast_entries: dict[str, object] = {}
        self.pins = _core.PinSet()
        self.retired_tables: list = []
        self.torch_libraries: dict[str, object] = {}
        self.torch_handles: dict = {}
        self.faked_namespaces: set[str] = set()
        self.fakes_by_table: dict[int, object] = {}
        self.device_modules: dict[str, int] = {}
        self.lock = threading.RLock()  # one slow-path get at a time

    def find(self, name: str, requested: str | None):
        """The kernel's state for the device as asked, or None."""
        return self.requests.get((name, requested))

    def keep(self, state, requested: str | None) -> None:
        self.kernels[(state.name, state.backend)] = state
        # Every way of asking that resolved to this backend now finds the new state.
        for key, before in self.requests.items():
            if key[0] == state.name and before.backend == state.backend:
                self.requests[key] = state
        self.requests[(state.name, requested)] = self.requests[(state.name, state.backend)] = state


STATE = ProcessState()
