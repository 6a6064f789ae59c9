"""Calling a kernel library's launcher directly, without its op: the C
struct a launcher takes for each tensor (tests time the kernel alone this
way, and call launchers without a binding). Loading libraries and filling
launcher tables is registry/load.py's.
"""
from __future__ import annotations

import ctypes


class KregTensor(ctypes.Structure):
    """registry/include/kreg/abi.h's kreg_tensor."""

    _fields_ = [("data", ctypes.c_void_p), ("numel", ctypes.c_int64), ("ndim", ctypes.c_int64),
                ("sizes", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]

    @classmethod
    def of(cls, tensor) -> "KregTensor":
        sizes = (ctypes.c_int64 * tensor.dim())(*tensor.shape)
        strides = (ctypes.c_int64 * tensor.dim())(*tensor.stride())
        view = cls(tensor.data_ptr(), tensor.numel(), tensor.dim(), sizes, strides)
        view._keep = (sizes, strides)  # the arrays must outlive the struct
        return view
