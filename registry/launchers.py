"""Kernel libraries as Python loads them, and their launcher tables.

The generated binding is compiled once per op signature; the kernel library
is compiled per kernel version. The binding's op takes the address of a
launcher table holding the launcher addresses found in the kernel library
(core/launcher_table.h defines and fills it). Swapping a table is how a new
kernel version goes live without touching the binding.
"""
from __future__ import annotations

import ctypes

from registry import _core


def _kreg_tensor_class():
    class KregTensor(ctypes.Structure):
        """registry/include/kreg/abi.h's kreg_tensor, for calling a launcher directly
        (benchmarks time the kernel alone this way)."""

        _fields_ = [("data", ctypes.c_void_p), ("numel", ctypes.c_int64), ("ndim", ctypes.c_int64),
                    ("sizes", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]

        @classmethod
        def of(cls, tensor) -> "KregTensor":
            sizes = (ctypes.c_int64 * tensor.dim())(*tensor.shape)
            strides = (ctypes.c_int64 * tensor.dim())(*tensor.stride())
            view = cls(tensor.data_ptr(), tensor.numel(), tensor.dim(), sizes, strides)
            view._keep = (sizes, strides)  # the arrays must outlive the struct
            return view

    KregTensor.__module__, KregTensor.__qualname__ = __name__, "KregTensor"
    return KregTensor


def __getattr__(name: str):
    # KregTensor is made on first use: only benchmarks and tests call a launcher
    # directly, and a ctypes structure costs a fresh process's `get` ~0.1 ms.
    if name == "KregTensor":
        global KregTensor
        KregTensor = _kreg_tensor_class()
        return KregTensor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_library(path: str) -> ctypes.CDLL:
    # RTLD_LOCAL: two versions of one kernel export the same launcher names.
    return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)


def build_table(library: ctypes.CDLL, op_spec, kernel: str, symbols: list[tuple[str, str]]):
    """The launcher table (_core.LauncherTable; .address is what the binding
    takes) of `op_spec`, its launchers looked up in `library`. symbols:
    (dtype, launcher symbol) per listed dtype, as a plan names them (core/plan.h).
    Raises naming every missing launcher and what to define."""
    return _core.launcher_table(library._handle, kernel, op_spec, symbols)
