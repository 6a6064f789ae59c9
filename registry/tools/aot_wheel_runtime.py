"""What an AOT wheel's package runs at import (registry/tools/aot_wheel.py
copies this file in as <package>/_runtime.py). It imports torch only: the
registry is not installed where a wheel runs.

A backend of the package is three prebuilt files, none compiled against
torch's or Python's version:
  - the shared binding (kreg_binding_*.so: torch's stable ABI and Python's
    limited API, core/stable_binding_text.h), loaded with ctypes, handed the
    few Python objects it needs (kreg_init, as registry/load.py does), and
    asked to register one `call` op per signature (kreg_define);
  - the kernel library (torch-free, kreg/abi.h), opened with ctypes;
  - each op's launcher table as an image (core/launcher_table_image.h):
    bytes, then its pointers set again from the library's symbols and
    copies of its strings.
torch.ops.<namespace>.<op> is defined on top, its CPU or CUDA kernel calling
the binding's `call` with the backend's table, and a fake kernel for
torch.compile (the package's __init__.py).
"""
from __future__ import annotations

import ctypes
import os

import torch

# Everything a registered op points into lives as long as the process.
_kept: list = []


def open_library(path: str) -> ctypes.CDLL:
    library = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    _kept.append(library)
    return library


def load_binding(path: str):
    """The shared binding, initialised; returns its kreg_define."""
    library = ctypes.PyDLL(path, mode=ctypes.RTLD_LOCAL)
    init = library.kreg_init
    init.restype, init.argtypes = ctypes.c_int, [ctypes.py_object]
    # The same tuple as registry/load.py's SharedBinding hands it (core/fast_entry.h says what each is for).
    init((torch.Tensor, getattr(torch.Tensor, "__dlpack_c_exchange_api__", None),
          torch._C._get_deterministic_algorithms, torch._C._get_deterministic_fill_uninitialized_memory,
          torch._C._is_torch_function_mode_enabled, torch._C._len_torch_dispatch_stack,
          torch._C._increment_version, torch._C._autograd._profiler_enabled))
    define = library.kreg_define
    define.restype, define.argtypes = ctypes.c_char_p, [ctypes.c_char_p, ctypes.c_char_p]
    _kept.append(library)
    return define


def define_call(define, namespace: str, schema: str):
    """Registers namespace::call (schema: "call(...)") in the binding; returns the op."""
    error = define(namespace.encode(), schema.encode())
    if error is not None:
        raise ImportError(f"torch refused to register {namespace}::{schema}: {error.decode(errors='replace')}")
    return getattr(torch.ops, namespace).call.default


def table(library: ctypes.CDLL, image_hex: str, relocations: list) -> int:
    """The launcher table rebuilt from its image; returns its address."""
    image = bytes.fromhex(image_hex)
    buffer = ctypes.create_string_buffer(image, len(image))  # malloc'd: aligned for the struct
    base = ctypes.addressof(buffer)
    for offset, kind, value in relocations:
        if kind == "symbol":
            address = ctypes.cast(getattr(library, value), ctypes.c_void_p).value
        else:
            text = ctypes.create_string_buffer(value.encode())
            _kept.append(text)
            address = ctypes.addressof(text)
        ctypes.c_void_p.from_address(base + offset).value = address
    _kept.append(buffer)
    return base


def here(*parts: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), *parts)
