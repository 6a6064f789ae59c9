"""Meta tensors: all-meta inputs give a meta output (what torch.compile's
tracing needs); a meta tensor mixed with real ones is an error naming the
argument, as torch.add raises, never an uninitialized result.

The dispatcher prefers the Meta key over CPU and CUDA, so a mixed call runs
the fake kernel, not the binding's device checks: the fake must check."""
from __future__ import annotations

import pytest
import torch

import registry


def _callers(copy):
    handle = registry.get(copy.name, device=copy.device)
    return {"handle": handle, "torch.ops": getattr(getattr(torch.ops, copy.name), "axpy")}


def test_mixed_meta_and_real_inputs_raise_naming_the_argument(lib_axpy):
    real, meta = torch.randn(8, device=lib_axpy.device), torch.empty(8, device="meta")
    with pytest.raises(RuntimeError):
        torch.add(real, meta)  # what torch itself does
    for via, op in _callers(lib_axpy).items():
        with pytest.raises(RuntimeError, match=f"argument 'y' is on meta but 'x' is on {lib_axpy.device}"):
            op(real, meta, 2.0)
            pytest.fail(f"{via}: a real and a meta input gave a result")
        with pytest.raises(RuntimeError, match=f"argument 'y' is on {lib_axpy.device}.* but 'x' is on meta"):
            op(meta, real, 2.0)
            pytest.fail(f"{via}: a meta and a real input gave a result")


def test_all_meta_inputs_give_a_meta_output(lib_axpy):
    x, y = torch.empty(8, 3, device="meta"), torch.empty(8, 3, device="meta")
    for via, op in _callers(lib_axpy).items():
        out = op(x, y, 2.0)
        assert out.device.type == "meta" and out.shape == (8, 3), via


def test_plain_binding_handle_checks_meta_too(axpy_copy):
    op = registry.get(axpy_copy.name, device="cpu")
    with pytest.raises(RuntimeError, match="argument 'y' is on meta but 'x' is on cpu"):
        op(torch.randn(8), torch.empty(8, device="meta"), 2.0)
    assert op(torch.empty(8, device="meta"), torch.empty(8, device="meta"), 2.0).device.type == "meta"
