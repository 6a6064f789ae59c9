"""The cubin paths (NVRTC, nvcc -cubin) on a GPU: going back to earlier
header content reuses its cubin with 0 compiles, and the cubin's module is
looked up per device (loaded on first use on each; a second GPU's call
launches from its own module). Run on a CUDA machine:
`python -m pytest -m gpu tests/test_gpu_device_paths.py -v`; with two GPUs
the cross-device test runs too."""
from __future__ import annotations

import pytest
import torch

import registry
from conftest import KernelCopy, _counter
from device_build_helpers import PATHS, copy_example
from registry.device import cubin_build as device_build
from registry.state import STATE

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(params=PATHS)
def cubin_copy(request, kernels_root) -> KernelCopy:
    return copy_example(kernels_root, request.param, f"_dp{next(_counter)}")


def _bias(op, device="cuda") -> float:
    x = torch.zeros(4096, device=device)
    out = op(x, x, 1.0)
    torch.cuda.synchronize(device)
    return float(out[0])


def test_reverting_a_header_edit_reuses_the_earlier_cubin(cubin_copy):
    op = registry.get(cubin_copy.name, device="cuda")
    config = cubin_copy.path(cubin_copy.config)
    original = config.read_text()
    config.with_name("extra.h").write_text("#pragma once\n#define AXPY_EXTRA 1\n")
    config.write_text(original.replace("AXPY_BIAS 0.0f", "AXPY_BIAS 5.0f") + '#include "extra.h"\n')
    registry.get(cubin_copy.name, device="cuda")
    assert _bias(op) == pytest.approx(5.0)
    config.write_text(original)
    start = len(device_build.compiles_run)
    registry.get(cubin_copy.name, device="cuda")
    assert device_build.compiles_run[start:] == [], "the revert compiled the cubin again"
    assert _bias(op) == pytest.approx(0.0)
    assert "device" not in registry.status(cubin_copy.name, device="cuda").compiled


def test_the_module_is_loaded_per_device(cubin_copy):
    op = registry.get(cubin_copy.name, device="cuda")
    assert _bias(op) == pytest.approx(0.0)
    key = registry.status(cubin_copy.name, device="cuda").device.rsplit("cubin key ", 1)[1]
    assert (key, torch.cuda.current_device()) in STATE.device_modules


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_second_gpus_call_launches_from_its_own_module(cubin_copy):
    op = registry.get(cubin_copy.name, device="cuda")
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(1 << 16, generator=gen), torch.randn(1 << 16, generator=gen)
    for device in ("cuda:0", "cuda:1", "cuda:0"):
        out = op(x.to(device), y.to(device), 1.5)
        torch.cuda.synchronize(device)
        assert out.device == torch.device(device)
        torch.testing.assert_close(out.cpu(), 1.5 * x + y)
