"""An op's bool, int and float arguments accept what torch's own functions
accept for those schema types (torch's Python argument parser: torch.sum's
keepdim, torch.select's index, torch.dropout's p), no more, on the fast entry
and on the dispatcher's path both."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import registry
from registry.errors import OpArgumentError

SIGNATURE = "axpy(Tensor x, Tensor y, float alpha, int k, bool neg) -> Tensor"


class _Passthrough(TorchFunctionMode):  # the fast entry declines: the call takes the dispatcher's op
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def op(kernels_root):
    from conftest import KernelCopy, _counter

    copy = KernelCopy(kernels_root, "axpy", f"axpy_t{next(_counter)}")
    copy.edit("kernel.toml", 'signature = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"', f'signature = "{SIGNATURE}"')
    copy.edit("axpy.h", "float alpha, [[maybe_unused]] void* stream)",
              "float alpha, int64_t k, bool neg, [[maybe_unused]] void* stream)")
    copy.edit("axpy_cpu.cpp", "AXPY_LAUNCHER(f32) { return axpy_cpu<float>(out, x, y, alpha); }",
              "AXPY_LAUNCHER(f32) { return axpy_cpu<float>(out, x, y, (neg ? -alpha : alpha) * float(k)); }")
    return registry.get(copy.name, device="cpu")


def _paths(op, args):
    """The call through the fast entry, then through the dispatcher's op."""
    yield "fast entry", lambda: op(*args)

    def dispatcher():
        with _Passthrough():
            return op(*args)

    yield "dispatcher", dispatcher


X, Y = torch.ones(4), torch.zeros(4)


@pytest.mark.parametrize("alpha, k, neg, want", [
    (2.0, 3, True, -6.0), (2, 3, False, 6.0),                                   # an int is a float
    (np.float32(0.5), np.int64(2), False, 1.0), (torch.tensor(0.5), torch.tensor(2), False, 1.0),
])
def test_what_torch_accepts_is_accepted(op, alpha, k, neg, want):
    for path, call in _paths(op, (X, Y, alpha, k, neg)):
        torch.testing.assert_close(call(), torch.full((4,), want), msg=path)


@pytest.mark.parametrize("alpha, k, neg, argument, got", [
    (1.0, 1, 7, "neg", "int"), (1.0, 1, 1, "neg", "int"), (1.0, 1, 1.0, "neg", "float"),
    (1.0, 1, np.True_, "neg", "numpy.bool"), (1.0, 1, torch.tensor(True), "neg", "Tensor"),
    (1.0, 1, None, "neg", "NoneType"),
    (1.0, True, False, "k", "bool"), (1.0, 2.0, False, "k", "float"), (1.0, np.float64(2), False, "k", "numpy.float64"),
    ("1", 1, False, "alpha", "str"), (torch.tensor([0.5]), 1, False, "alpha", "Tensor"),
    (True, 1, False, "alpha", "bool"), (np.True_, 1, False, "alpha", "numpy.bool"),   # a flag is no number
    (torch.tensor(True), 1, False, "alpha", "Tensor"),
])
def test_what_torch_refuses_is_refused_naming_the_argument(op, alpha, k, neg, argument, got):
    expected = {"neg": "bool", "k": "int", "alpha": "float"}[argument]
    for path, call in _paths(op, (X, Y, alpha, k, neg)):
        with pytest.raises(OpArgumentError) as info:
            call()
        assert f"argument '{argument}' must be {expected}, not {got}" in str(info.value), (path, str(info.value))
        assert SIGNATURE in str(info.value)


class _Index:
    def __index__(self):
        return 1


class _Float:
    def __float__(self):
        return 0.5


PROBES = [True, False, 0, 1, 7, 0.5, 1.0, None, "1", np.True_, np.int64(1), np.uint8(1), np.float32(0.5),
          np.float64(1.0), torch.tensor(True), torch.tensor(1), torch.tensor(0.5), torch.tensor([1]),
          torch.tensor([0.5]), torch.tensor(0.5, requires_grad=True), _Index(), _Float()]


def _torch_takes(call) -> bool:
    try:
        call()
    except TypeError:
        return False
    except (RuntimeError, IndexError):  # past the parser: a value it took, refused later (7 as an index)
        return True
    return True


@pytest.mark.parametrize("value", PROBES, ids=lambda v: repr(v)[:30])
def test_the_rule_is_torchs_argument_parser(value):
    from registry import scalar_args

    x = torch.randn(3, 4)
    assert scalar_args.accepts("bool", value) == _torch_takes(lambda: torch.sum(x, 0, keepdim=value))
    if not (isinstance(value, torch.Tensor) and value.dtype == torch.bool):  # torch asserts internally on it
        assert scalar_args.accepts("int", value) == _torch_takes(lambda: torch.select(x, 0, value))
    # float refuses bools, which torch's parser takes (True as 1.0 hides a swapped argument)
    is_bool = isinstance(value, (bool, np.bool_)) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    assert scalar_args.accepts("float", value) == (_torch_takes(lambda: torch.dropout(x, value, False)) and not is_bool)
