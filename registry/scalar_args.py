"""Which Python values an op's bool, int and float arguments take.

The same as torch's own functions take for those schema types (torch's Python
argument parser: torch.sum's `bool keepdim`, torch.select's `int index`,
torch.dropout's `float p`), no more, and no bool for a float: torch takes True
as 1.0 there, which hides a flag passed where a number belongs. The dispatcher's op that a handle falls
back to (torch.ops) is looser: it takes 7, 1.0 or even None for a bool. The
fast entry (core/fast_entry.h) takes a subset (exact Python floats, ints and
bools) and leaves everything else to the handle, which checks here before it
calls the dispatcher, so both paths accept the same values:

  bool   a Python bool; not 0 or 1, a numpy.bool, a Tensor or None
  int    an int other than a bool, a numpy integer, an object with __index__
         (numpy.bool has none), or a one-element integral (not bool) Tensor
         that needs no grad
  float  a float or an int other than a bool, a numpy number, or a 0-dim
         Tensor, not bool, that needs no grad

(tests/test_scalar_args.py asks torch's own functions the same questions, so a
torch whose parser changes fails there.)
"""
from __future__ import annotations

import operator
import sys


def accepts(type_name: str, value) -> bool:
    """Whether an argument of schema type `type_name` ("bool", "int", "float")
    takes `value`; any other type is left to the binding's own check."""
    if type_name == "bool":
        return value is True or value is False
    if type_name == "int":
        return _is_int(value)
    if type_name == "float":
        return _is_float(value)
    return True


def type_label(value) -> str:
    """The type's name as torch's messages spell it: int, numpy.bool, Tensor."""
    import torch

    if isinstance(value, torch.Tensor):
        return "Tensor"
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _is_int(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    import torch

    if isinstance(value, torch.Tensor):
        return (value.numel() == 1 and not value.requires_grad and not value.is_floating_point()
                and not value.is_complex() and value.dtype != torch.bool)
    try:
        operator.index(value)  # numpy integers, and anything else with __index__
    except TypeError:
        return False
    return True


def _is_float(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (float, int)):
        return True
    numpy = sys.modules.get("numpy")  # not loaded: the value is no numpy scalar
    if numpy is not None and isinstance(value, numpy.generic):
        return isinstance(value, numpy.number) and not isinstance(value, numpy.complexfloating)
    import torch

    return (isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad
            and value.dtype != torch.bool)
