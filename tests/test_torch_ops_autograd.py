"""Gradients through torch.ops.<kernel>.<op> (binding = "torch-library"): the
manifest's backward reaches the dispatcher, eagerly and under
torch.compile(fullgraph=True), gives what the handle gives, and follows hot
reloads. rmsnorm (kernels/rmsnorm) is the kernel with a backward."""
from __future__ import annotations

import importlib.util

import pytest
import torch

import registry

from conftest import CHECKOUT, KernelCopy, _counter


def _reference():
    spec = importlib.util.spec_from_file_location("rmsnorm_reference", CHECKOUT / "kernels/rmsnorm/reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def lib_rmsnorm(kernels_root):
    copy = KernelCopy(kernels_root, "rmsnorm", f"rmsnorm_t{next(_counter)}")
    copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "torch-library"')
    copy.handle = registry.get(copy.name, device="cpu")
    copy.op = getattr(torch.ops, copy.name).rmsnorm
    return copy


def _inputs(dtype=torch.float32, rows=6, cols=64):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=gen, dtype=dtype).requires_grad_()
    w = torch.randn(cols, generator=gen, dtype=dtype).requires_grad_()
    g = torch.randn(rows, cols, generator=gen, dtype=dtype)
    return x, w, g


def _grads(fn, x, w, g=None):
    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    y = fn(x, w)
    (y.sum() if g is None else (y * g).sum()).backward()
    return x.grad, w.grad


def _float64_grads(x, w, g):
    return _reference().rmsnorm_backward(g, x.detach(), w.detach(), 1e-6)


def test_torch_ops_gradients_equal_the_handles_and_the_float64_reference(lib_rmsnorm):
    x, w, g = _inputs()
    through_ops = _grads(lambda a, b: lib_rmsnorm.op(a, b), x, w, g)
    through_handle = _grads(lambda a, b: lib_rmsnorm.handle.rmsnorm(a, b), x, w, g)
    assert through_ops[0] is not None and through_ops[1] is not None
    for ops_grad, handle_grad, exact in zip(through_ops, through_handle, _float64_grads(x, w, g)):
        assert torch.equal(ops_grad, handle_grad)  # the same backward kernel on the same gradient
        torch.testing.assert_close(ops_grad.double(), exact, rtol=1e-5, atol=2e-5)


def test_sum_backward_hands_the_backward_a_contiguous_gradient(lib_rmsnorm):
    # y.sum().backward() gives an expanded (stride-0) gradient, which the backward op refuses as an input.
    x, w, _ = _inputs()
    ones = torch.ones(x.shape, dtype=torch.float64)
    for fn in (lambda a, b: lib_rmsnorm.op(a, b), lambda a, b: lib_rmsnorm.handle.rmsnorm(a, b)):
        for got, exact in zip(_grads(fn, x, w), _float64_grads(x, w, ones)):
            torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=2e-5)


def test_float64_gradcheck_through_torch_ops(lib_rmsnorm):
    x, w, _ = _inputs(torch.float64, rows=3, cols=17)
    assert torch.autograd.gradcheck(lambda a, b: lib_rmsnorm.op(a, b, 1e-6), (x, w))


def test_compile_fullgraph_gives_the_eager_gradients(lib_rmsnorm):
    x, w, g = _inputs()
    eager = _grads(lambda a, b: lib_rmsnorm.op(a, b), x, w, g)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: lib_rmsnorm.op(a, b) * 2.0, fullgraph=True)  # raises on a graph break
    for got, want in zip(_grads(compiled, x, w, g), eager):
        torch.testing.assert_close(got, want * 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_with_inputs_that_require_grad(lib_rmsnorm, dtype):
    x, w, _ = _inputs(dtype, rows=4, cols=33)
    # opcheck alone passes an op with no autograd at all (its outputs then do not require grad).
    assert lib_rmsnorm.op(x, w).requires_grad
    # Every check, the autograd registration and the compiled backward (aot_dispatch_dynamic) among them.
    torch.library.opcheck(lib_rmsnorm.op.default, (x, w, 1e-6))


def test_a_hot_reload_changes_the_backward_torch_ops_runs(lib_rmsnorm):
    x, w, g = _inputs()
    before = _grads(lambda a, b: lib_rmsnorm.op(a, b), x, w, g)
    lib_rmsnorm.edit("rmsnorm_cpu.cpp", "from_acc<T>(static_cast<A>(gw[c]))", "from_acc<T>(static_cast<A>(3 * gw[c]))")
    registry.get(lib_rmsnorm.name, device="cpu")
    after = _grads(lambda a, b: lib_rmsnorm.op(a, b), x, w, g)
    torch.testing.assert_close(after[0], before[0])
    torch.testing.assert_close(after[1], 3 * before[1])


def test_a_python_backward_calling_a_registry_op_takes_a_sum_backward(axpy_copy):
    # As pytorch/extension-cpp registers mymuladd's backward: in Python, calling the kernel's own ops.
    axpy_copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "torch-library"')
    handle = registry.get(axpy_copy.name, device="cpu")
    axpy = getattr(torch.ops, axpy_copy.name).axpy

    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[2]

    def backward(ctx, grad):
        # grad from .sum().backward() is expanded; axpy refuses non-contiguous inputs.
        return axpy(grad, torch.zeros_like(grad), ctx.alpha), grad, None

    registry.register_autograd(axpy, backward, setup_context=setup_context)
    for fn in (axpy, handle):
        x, y = torch.randn(33, requires_grad=True), torch.randn(33, requires_grad=True)
        fn(x, y, 1.5).sum().backward()
        assert torch.equal(x.grad, torch.full((33,), 1.5)) and torch.equal(y.grad, torch.ones(33))
    with pytest.raises(registry.RegistryError, match="has a backward.*register_autograd gave it one"):
        registry.register_autograd(handle, backward, setup_context=setup_context)


def test_register_autograd_refuses_an_op_whose_manifest_names_a_backward(lib_rmsnorm):
    with pytest.raises(registry.RegistryError, match="its kernel.toml names a backward"):
        registry.register_autograd(lib_rmsnorm.op, lambda ctx, g: None)
