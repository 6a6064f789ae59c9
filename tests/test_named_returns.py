"""An op with several outputs returns a named tuple with the manifest's
output names, as torch's own ops do (torch.max(x, 0).values), and stays a
tuple: unpacking, indexing, torch.compile."""
from __future__ import annotations

import pytest
import torch

import registry


def test_several_outputs_come_back_by_name():
    rowmax = registry.get("rowmax", device="cpu")
    x = torch.randn(5, 33)
    out = rowmax(x)
    want = torch.max(x, -1)
    assert isinstance(out, tuple) and out._fields == ("values", "indices")
    assert torch.equal(out.values, want.values) and torch.equal(out.indices, want.indices)
    values, indices = out  # still a tuple
    assert values is out[0] and indices is out[1] and len(out) == 2
    assert type(out).__name__ == "rowmax" and repr(out).startswith("rowmax(values=tensor(")
    assert type(rowmax(x)) is type(out)  # one type per op, not one per call


def test_the_named_tuple_through_keywords_defaults_and_snapshots():
    layernorm = registry.get("layernorm", device="cpu")
    x, w = torch.randn(4, 16), torch.randn(16)
    for out in (layernorm(x, w, None), layernorm(x, weight=w, bias=None, eps=1e-5), layernorm.snapshot()(x, w, None)):
        assert out._fields == ("y", "mean", "rstd")
        torch.testing.assert_close(out.mean, x.mean(-1))


def test_one_output_stays_a_tensor():
    out = registry.get("softmax", device="cpu")(torch.randn(3, 8))
    assert type(out) is torch.Tensor


def test_torch_compile_sees_the_names():
    layernorm = registry.get("layernorm", device="cpu")

    def f(x, w):
        out = layernorm(x, w, None)
        return out.y * 2, out.mean + out.rstd

    x, w = torch.randn(4, 16), torch.randn(16)
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(x, w), f(x, w)):
        torch.testing.assert_close(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_several_outputs_come_back_by_name_on_cuda():
    rowmax = registry.get("rowmax", device="cuda")
    x = torch.randn(64, 257, device="cuda")
    out = rowmax(x)
    assert out._fields == ("values", "indices")
    torch.testing.assert_close(out.values, x.max(-1).values)
    assert torch.equal(out.indices, x.max(-1).indices)
