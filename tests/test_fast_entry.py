"""The Op handle's fast entry (core/fast_entry.h): a call with plain tensors
and numbers runs the binding's call() directly instead of going through
torch.ops' boxed path, and everything else still reaches the dispatcher's op.

What the fast entry saves a call is measured by bench/percall_n1.py (a
script, interleaved rounds on a pinned core), not here: a timed assert on a
shared 2-core machine fails on its neighbours' load, not on ours.
"""
from __future__ import annotations

import weakref

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import registry

pytestmark = pytest.mark.usefixtures("cache_root")  # the session's private cache, not the checkout's


def _profiled_names(fn) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events()]


def test_a_plain_call_skips_the_dispatcher():
    softmax = registry.get("softmax", device="cpu")
    x = torch.randn(4, 33)
    names = _profiled_names(lambda: softmax(x))
    assert "softmax.softmax" in names, names        # recorded by the fast entry, under the op's name
    assert not [n for n in names if n.endswith("::call")], names  # no kreg_<hash>::call: no dispatcher
    assert torch.allclose(softmax(x), torch.softmax(x, -1), atol=1e-6)


def test_every_argument_kind_and_several_outputs():
    layernorm = registry.get("layernorm", device="cpu")
    x, w, b = torch.randn(5, 17), torch.randn(17), torch.randn(17)
    fast = layernorm._fast
    assert fast is not None
    for bias in (b, None):
        got = fast(x, w, bias, 1e-5)
        assert got is not NotImplemented
        want = torch.nn.functional.layer_norm(x, (17,), w, bias, 1e-5)
        assert torch.allclose(got[0], want, atol=1e-5) and got[1].shape == (5,) and got[2].dtype == torch.float32
    assert fast(x, w, b, 1) is not NotImplemented     # a Python int for a float, as torch.ops takes it


def test_anything_else_is_left_to_the_dispatcher():
    softmax = registry.get("softmax", device="cpu")
    fast = softmax._fast
    x = torch.randn(3, 8)
    assert fast(x, "1.0") is NotImplemented             # the dispatcher's schema check says what is wrong
    assert fast(x) is NotImplemented                    # arity: the handle binds defaults first
    assert fast(x.requires_grad_(), 1.0) is NotImplemented  # autograd
    with torch.no_grad():
        assert fast(x, 1.0) is not NotImplemented
    assert fast(torch.empty(3, 8, device="meta"), 1.0) is NotImplemented  # the fake kernel

    class Logged(torch.Tensor):  # a subclass: its __torch_function__ must see the call
        pass

    assert fast(torch.randn(3, 8).as_subclass(Logged), 1.0) is NotImplemented

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(3, 8)
    with Seen() as seen:
        assert fast(x, 1.0) is NotImplemented
        softmax(x)
    assert any(op.endswith("call.default") for op in seen.ops), seen.ops

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Functions():
        assert fast(x, 1.0) is NotImplemented


def test_an_in_place_op_takes_the_fast_entry_and_bumps_the_version():
    """scale_(Tensor(a!) x, float a): the write is seen by autograd as through
    the dispatcher (x._version goes up by one a call), and an inference
    tensor, which has no version counter, is written as the dispatcher does."""
    scale_ = registry.get("scale", device="cpu")
    assert scale_._fast is not None
    x = torch.ones(10)
    names = _profiled_names(lambda: scale_(x, 3.0))
    assert "scale.scale_" in names and not [n for n in names if n.endswith("::call")], names
    assert torch.equal(x, torch.full((10,), 3.0))
    before = x._version
    scale_(x, 2.0)
    assert x._version == before + 1
    for _ in range(3):  # the bump's kept argument tuple lets the tensor go
        scale_(x, 1.0)
    assert x._version == before + 4
    gone = torch.ones(5)
    watch = weakref.ref(gone)
    scale_(gone, 1.0)
    del gone
    assert watch() is None
    with torch.inference_mode():
        frozen = torch.ones(4)
    scale_(frozen, 5.0)
    assert torch.equal(frozen, torch.full((4,), 5.0))

    # A tensor autograd saved, then written in place: backward refuses, as it does for torch's own in-place ops.
    w = torch.ones(3, requires_grad=True)
    y = w * 2
    saved = y.sin()
    scale_(y.detach(), 4.0)  # detach() shares the version counter, like torch's own ops do
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved.sum().backward()


def test_outputs_come_straight_from_the_allocator():
    """The binding allocates its outputs from the device's allocator, as
    torch's own kernels do, not through at::empty and the dispatcher (a fixed
    cost on every output of every call); one output or three alike."""
    softmax = registry.get("softmax", device="cpu")
    layernorm = registry.get("layernorm", device="cpu")
    x, w = torch.randn(4, 33), torch.randn(33)
    for call in (lambda: softmax(x), lambda: layernorm(x, w, None)):
        names = _profiled_names(call)
        assert not [n for n in names if n.startswith("aten::empty")], names
    y, mean, rstd = layernorm(x, w, None)
    assert torch.allclose(y, torch.nn.functional.layer_norm(x, (33,), w, None, 1e-5), atol=1e-5)
    assert (mean.shape, mean.dtype, rstd.shape, rstd.dtype) == ((4,), torch.float32, (4,), torch.float32)
    assert torch.allclose(softmax(x), torch.softmax(x, -1), atol=1e-6)


@pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 14),
                    reason="before torch 2.14 the stable ABI converts no tensor to Python: outputs come "
                           "through DLPack, wrapping the memory (core/fast_entry.h)")
def test_outputs_are_the_tensors_torch_allocated():
    """The fast entry hands back the very tensor the binding allocated, not a
    view of its memory: its storage can be resized (and, on CUDA, it is the
    caching allocator's block, so record_stream holds), as any torch output's,
    and nothing else holds it."""
    softmax = registry.get("softmax", device="cpu")
    layernorm = registry.get("layernorm", device="cpu")
    x, w = torch.randn(4, 33), torch.randn(33)
    for out in (softmax(x), *layernorm(x, w, None)):
        assert out._use_count() == 1
        out.resize_(2, 100)
        assert out.shape == (2, 100)


def test_deterministic_mode_still_fills_new_outputs(monkeypatch):
    """With deterministic algorithms and fill_uninitialized_memory on, torch
    fills new memory (NaN) so an output a launcher leaves unwritten shows:
    the outputs then come from at::empty, which does that."""
    softmax = registry.get("softmax", device="cpu")
    x = torch.randn(4, 33)
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    torch.use_deterministic_algorithms(True)
    try:
        names = _profiled_names(lambda: softmax(x))
        got = softmax(x)
        # The dispatcher's kernel too (it asks Python under the GIL it takes).
        boxed = _profiled_names(lambda: softmax._fn(x, 1.0, softmax._address))
    finally:
        torch.use_deterministic_algorithms(False)
    assert "aten::empty" in names and "aten::fill_" in names, names
    assert "aten::empty" in boxed and "aten::fill_" in boxed, boxed
    assert torch.allclose(got, torch.softmax(x, -1), atol=1e-6)


def test_a_compile_session_outside_dynamo_keeps_the_fast_entry(monkeypatch):
    """torch.compiler.is_compiling() is also True in a compile or export
    session outside Dynamo's tracing; a real eager call there gives the same
    result either way, so the handle asks only whether Dynamo traces it."""
    softmax = registry.get("softmax", device="cpu")
    x = torch.randn(4, 33)
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)
    assert torch.compiler.is_compiling()
    names = _profiled_names(lambda: softmax(x))
    assert "softmax.softmax" in names and not [n for n in names if n.endswith("::call")], names


def test_errors_read_as_before():
    softmax = registry.get("softmax", device="cpu")
    with pytest.raises(RuntimeError, match="is not contiguous"):
        softmax(torch.randn(8, 3).t())
    with pytest.raises(RuntimeError, match="argument 'weight' is Float but 'x' is Int; convert one of them"):
        registry.get("layernorm", device="cpu")(torch.randn(2, 3).to(torch.int32), torch.randn(3), None)

