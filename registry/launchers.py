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

from registry import _core
from registry.errors import RegistryError

TABLE_MAGIC = 0x6B72656754424C31  # "kregTBL1", checked by the binding
DTYPE_SLOTS = ("float32", "float16", "bfloat16", "float64")


class LauncherTable(ctypes.Structure):
    _fields_ = [
        ("magic", ctypes.c_uint64),
        ("op_name", ctypes.c_char_p),
        ("dtypes", ctypes.c_char_p),
        ("same_shape_mask", ctypes.c_uint64),
        ("launchers", ctypes.c_void_p * len(DTYPE_SLOTS)),
    ]


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


def open_library(path: str) -> ctypes.CDLL:
    # RTLD_LOCAL: two versions of one kernel export the same launcher names.
    return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)


def build_table(library: ctypes.CDLL, op_spec, kernel: str) -> LauncherTable:
    table = LauncherTable()
    table.magic = TABLE_MAGIC
    table.op_name = f"{kernel}.{op_spec.name}".encode()
    table.dtypes = ", ".join(op_spec.dtypes).encode()
    tensor_args = [a.name for a in op_spec.signature.args if a.type_name == "Tensor"]
    table.same_shape_mask = sum(1 << i for i, n in enumerate(tensor_args) if n in op_spec.same_shape)
    for dtype in op_spec.dtypes:
        symbol = f"{op_spec.launcher}_{_core.dtype_suffix(dtype)}"
        try:
            address = ctypes.cast(getattr(library, symbol), ctypes.c_void_p).value
        except AttributeError:
            raise RegistryError(
                f"kernel {kernel!r}: the library does not export launcher {symbol!r} for {dtype}. "
                f"Define it as `KREG_API const char* {symbol}(...)` (see registry/include/kreg/abi.h), "
                f"or remove {dtype} from the op's dtypes in kernel.toml."
            ) from None
        table.launchers[DTYPE_SLOTS.index(dtype)] = address
    return table
