"""Launcher tables: how a compiled binding finds one kernel version's code.

The generated binding is compiled once per op signature; the kernel library
is compiled per kernel version. The binding's op takes the address of a
LauncherTable (below; the C struct of the same name in codegen.cc is its
twin) holding the launcher addresses that dlsym found in the kernel library.
Swapping a table is how a new kernel version goes live without touching the
binding.
"""
from __future__ import annotations

import ctypes

from registry import _core, dtypes
from registry.errors import RegistryError

TABLE_MAGIC = 0x6B72656754424C32  # "kregTBL2", checked by the binding
DTYPE_SLOTS = dtypes.NAMES  # the dtype table (core/dtype.h), by code


class DimTerm(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("arg", ctypes.c_int32), ("a", ctypes.c_int64), ("b", ctypes.c_int64)]


class OutputDecl(ctypes.Structure):
    _fields_ = [("dtype_code", ctypes.c_int32), ("dtype_arg", ctypes.c_int32), ("ndims", ctypes.c_int32),
                ("unused", ctypes.c_int32), ("dims", DimTerm * _core.BINDING_MAX_OUTPUT_DIMS)]


class LauncherTable(ctypes.Structure):
    _fields_ = [
        ("magic", ctypes.c_uint64),
        ("op_name", ctypes.c_char_p),
        ("dtypes", ctypes.c_char_p),
        ("same_shape_mask", ctypes.c_uint64),  # bit i: argument i
        ("arg_dtypes", ctypes.c_int32 * _core.BINDING_MAX_ARGS),
        ("outputs", OutputDecl * _core.BINDING_MAX_OUTPUTS),
        ("launchers", ctypes.c_void_p * len(DTYPE_SLOTS)),
    ]


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


def build_table(library: ctypes.CDLL, op_spec, kernel: str, symbols=None) -> LauncherTable:
    """symbols: (dtype, launcher symbol) per listed dtype, as a plan names them
    (core/plan.h); asked of the core when not given."""
    table = LauncherTable()
    table.magic = TABLE_MAGIC
    table.op_name = f"{kernel}.{op_spec.name}".encode()
    table.dtypes = ", ".join(op_spec.dtypes).encode()
    names = [a.name for a in op_spec.signature.args]
    table.same_shape_mask = sum(1 << names.index(n) for n in op_spec.same_shape)
    for i, code in enumerate(op_spec.arg_dtypes):
        table.arg_dtypes[i] = code
    for k, spec in enumerate(op_spec.outputs):
        decl = table.outputs[k]
        decl.dtype_code, decl.dtype_arg, decl.ndims = spec.dtype_code, spec.dtype_arg, len(spec.dims)
        for j, term in enumerate(spec.dims):
            decl.dims[j] = DimTerm(term.kind, term.arg, term.a, term.b)
    missing = []
    if symbols is None:
        symbols = [(dtype, f"{op_spec.launcher}_{dtypes.SUFFIXES[dtype]}") for dtype in op_spec.dtypes]
    for dtype, symbol in symbols:
        try:
            table.launchers[DTYPE_SLOTS.index(dtype)] = ctypes.cast(getattr(library, symbol), ctypes.c_void_p).value
        except AttributeError:
            missing.append(symbol)
    if missing:
        exported = [f"{op_spec.launcher}_{dtypes.SUFFIXES[d]}" for d in op_spec.dtypes
                    if f"{op_spec.launcher}_{dtypes.SUFFIXES[d]}" not in missing]
        raise RegistryError("; ".join(_core.missing_launchers(kernel, [op_spec], exported)))
    return table
