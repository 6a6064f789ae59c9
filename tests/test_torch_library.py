"""Ops torch.compile sees: binding = "torch-library", on the CPU and (marked
gpu, skipped without one) on CUDA."""
from __future__ import annotations

import pytest
import torch

import registry


def _ns_op(copy):
    return getattr(getattr(torch.ops, copy.name), "axpy")


def _bias(fn, device) -> float:
    x, y = torch.randn(64, device=device), torch.randn(64, device=device)
    return float((fn(x, y, 1.5) - (1.5 * x + y)).mean())


def test_reachable_as_torch_ops(lib_axpy):
    x, y = torch.randn(33, device=lib_axpy.device), torch.randn(33, device=lib_axpy.device)
    torch.testing.assert_close(_ns_op(lib_axpy)(x, y, 1.5), 1.5 * x + y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_opcheck_is_clean(lib_axpy, dtype):
    x, y = (torch.randn(17, device=lib_axpy.device).to(dtype) for _ in range(2))
    torch.library.opcheck(_ns_op(lib_axpy).default, (x, y, 1.5))


def test_compile_fullgraph_without_graph_break_matches_eager(lib_axpy):
    op = _ns_op(lib_axpy)
    handle = registry.get(lib_axpy.name, device=lib_axpy.device)

    def f(x, y):
        return op(x, y, 1.5) * 2 + handle(x, y, 0.5)

    x, y = torch.randn(1000, device=lib_axpy.device), torch.randn(1000, device=lib_axpy.device)
    compiled = torch.compile(f, fullgraph=True)  # raises on any graph break
    torch.testing.assert_close(compiled(x, y), f(x, y))


def test_three_hot_reloads_in_one_process(lib_axpy):
    op = _ns_op(lib_axpy)
    compiled = torch.compile(lambda x, y, a: op(x, y, a), fullgraph=True)
    device = lib_axpy.device
    assert _bias(compiled, device) == pytest.approx(0.0, abs=1e-5)
    for k in (1, 2, 3):
        config = lib_axpy.path("include/axpy/config.h")
        text = config.read_text()
        old = text[text.index("#define AXPY_BIAS"):].splitlines()[0]
        config.write_text(text.replace(old, f"#define AXPY_BIAS {k}.0f"))
        registry.get(lib_axpy.name, device=device)
        assert _bias(op, device) == pytest.approx(k, abs=1e-4)        # torch.ops.<kernel>.axpy
        assert _bias(compiled, device) == pytest.approx(k, abs=1e-4)  # a graph compiled before the reload
        torch._dynamo.reset()
        recompiled = torch.compile(lambda x, y, a: op(x, y, a), fullgraph=True)
        assert _bias(recompiled, device) == pytest.approx(k, abs=1e-4)
