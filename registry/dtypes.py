"""The dtype table as Python sees it: core/dtype.h, the one place that names
the element types an op can take, read once through `_core.DTYPES`.

Python code asks here instead of spelling dtypes itself, so a dtype added to
the table reaches the manifest parser, the launcher tables, the `%%kernel`
magic and `sweep` at once. Names are torch's (`torch.<name>` is the dtype).
"""
from __future__ import annotations

from registry import _core

# By code: a dtype's index is its KREG_DTYPE_* code and its launcher-table slot.
NAMES: tuple[str, ...] = tuple(name for name, _, _ in _core.DTYPES)

# Bytes per element, by code.
ELEMENT_SIZES: tuple[int, ...] = tuple(size for _, _, size in _core.DTYPES)

# Launcher symbol suffix: "float32" -> "f32" (axpy_f32).
SUFFIXES: dict[str, str] = {name: suffix for name, suffix, _ in _core.DTYPES}


def torch_dtype(name: str):
    """torch.<name>; the table's names are torch's."""
    import torch

    return getattr(torch, name)
