"""One prefix rule for the registry's messages: `<kernel>.<op>: ` when the
message is about an op (its arguments, its launcher's refusal, its fake, a
sweep or tune of it), whichever path raised it."""
from __future__ import annotations

import pytest
import torch

import registry


@pytest.fixture(scope="module")
def axpy(kernels_root):
    from conftest import KernelCopy, _counter

    copy = KernelCopy(kernels_root, "axpy", f"axpy_t{next(_counter)}")
    return registry.get(copy.name, device="cpu")


def _message(call) -> str:
    with pytest.raises(registry.RegistryError) as info:
        call()
    return str(info.value)


def test_argument_messages_name_kernel_and_op(axpy):
    prefix = f"{axpy.kernel}.axpy: "
    x = torch.randn(8)
    assert _message(lambda: axpy(x, x, "a")).startswith(prefix + "argument 'alpha'")
    assert _message(lambda: axpy(x, x.double(), 1.0)).startswith(prefix + "argument 'y'")
    # a meta tensor among real ones reaches the op's fake, not the binding's checks
    assert _message(lambda: axpy(x, torch.empty(8, device="meta"), 1.0)).startswith(prefix + "argument 'y' is on meta")


def test_a_launchers_refusal_is_prefixed_once():
    rowmax = registry.get("rowmax", device="cpu")
    message = _message(lambda: rowmax(torch.randn(3, 0)))
    assert message == "rowmax.rowmax: the launcher failed: rows of length 0 have no maximum"


def test_tune_and_sweep_name_the_op():
    assert _message(lambda: registry.tune("rowmax", dtypes=["float64"], device="cpu")).startswith(
        "rowmax.rowmax: lists only float32, float16, bfloat16")
    assert _message(lambda: registry.tune("rowmax", shapes=[(4, 4, 4)], device="cpu")).startswith(
        "rowmax.rowmax: a shape has 2 sizes")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_launchers_refusal_is_prefixed_once():
    rowmax = registry.get("rowmax", device="cuda")
    message = _message(lambda: rowmax(torch.randn(3, 0, device="cuda")))
    assert message == "rowmax.rowmax: the launcher failed: rows of length 0 have no maximum"
