"""Device code through `nvcc -cubin` on a GPU (kernels/axpy_cubin): launch,
numerics, and the edit loop. A device-code edit recompiles only the cubin, a
header edit gives the new result every time (0 stale), and the launch path is
the NVRTC one (kreg/launch.h, the driver API). Run on a CUDA machine with the
toolkit: `python -m pytest -m gpu tests/test_gpu_nvcc_cubin.py -v`.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import registry
from conftest import KernelCopy, _counter
from registry import environment

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
              pytest.mark.skipif(not Path(environment.nvcc_command()).is_file(),
                                 reason="no nvcc: compiler = \"nvcc-cubin\" needs the CUDA toolkit")]


@pytest.fixture
def cubin_copy(kernels_root) -> KernelCopy:
    return KernelCopy(kernels_root, "axpy_cubin", f"axpy_cubin_t{next(_counter)}")


def _value(op, x=1.0, y=2.0, alpha=3.0, n=1 << 12, dtype=torch.float32) -> float:
    xs = torch.full((n,), x, device="cuda", dtype=dtype)
    ys = torch.full((n,), y, device="cuda", dtype=dtype)
    out = op(xs, ys, alpha)
    torch.cuda.synchronize()
    assert torch.all(out == out[0]), "every element (vector body and scalar tail) must agree"
    return float(out[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 17, (1 << 20) + 3])
def test_launches_and_matches_the_reference(cubin_copy, dtype, n):
    op = registry.get(cubin_copy.name, device="cuda")
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=gen).to("cuda", dtype)
    y = torch.randn(n, generator=gen).to("cuda", dtype)
    expected = (0.5 * x.double() + y.double()).to(dtype)
    torch.testing.assert_close(op(x, y, 0.5), expected, atol=1e-2 if dtype != torch.float32 else 1e-6, rtol=1e-2)


def test_status_names_nvcc(cubin_copy):
    registry.get(cubin_copy.name, device="cuda")
    status = registry.status(cubin_copy.name, device="cuda")
    assert status.device is not None and status.device.startswith("nvcc -cubin "), status.device
    assert "cubin key" in status.device


def test_device_edit_rebuilds_only_the_cubin(cubin_copy, compiles):
    op = registry.get(cubin_copy.name, device="cuda")
    assert _value(op) == 5.0
    before = len(compiles(cubin_copy.name))
    cubin_copy.edit("axpy_device.cu", "axpy_element(alpha, kreg::to_float(xv[u].lane[l])",
                    "1.0f + axpy_element(alpha, kreg::to_float(xv[u].lane[l])")
    cubin_copy.edit("axpy_device.cu", "out[i] = kreg::from_float<T>(axpy_element(",
                    "out[i] = kreg::from_float<T>(1.0f + axpy_element(")
    assert registry.get(cubin_copy.name, device="cuda") is op
    assert _value(op) == 6.0
    assert compiles(cubin_copy.name)[before:] == [], "the host launcher library must not be rebuilt"
    assert registry.status(cubin_copy.name, device="cuda").compiled == ["device"]


def test_header_edits_are_never_stale(cubin_copy):
    op = registry.get(cubin_copy.name, device="cuda")
    for bias in range(1, 5):
        cubin_copy.path("include/axpy_cubin/config.h").write_text(
            f"#pragma once\n#define AXPY_BIAS {bias}.0f\n#define AXPY_VECTORS_PER_THREAD 4\n")
        registry.get(cubin_copy.name, device="cuda")
        assert _value(op) == 5.0 + bias, f"stale result after header edit {bias}"


def test_host_launcher_edit_rebuilds_only_the_launchers(cubin_copy):
    op = registry.get(cubin_copy.name, device="cuda")
    cubin_copy.edit("axpy_launch.cpp", "if (aligned(x.data) && aligned(y.data) && aligned(out.data)) {",
                    "if (false) {")
    registry.get(cubin_copy.name, device="cuda")
    assert registry.status(cubin_copy.name, device="cuda").compiled == ["lib"]
    assert _value(op, alpha=4.0) == 6.0


def test_a_device_compile_error_keeps_the_previous_op(cubin_copy):
    from registry.errors import BuildError

    op = registry.get(cubin_copy.name, device="cuda")
    cubin_copy.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return alpha * x + y + AXPY_BIAS + oops;")
    with pytest.raises(BuildError) as caught:
        registry.get(cubin_copy.name, device="cuda")
    assert caught.value.first.file.endswith("axpy_math.h")
    assert _value(op) == 5.0
