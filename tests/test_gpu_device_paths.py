"""Device code in its own cubin on a GPU, on both build paths (NVRTC and
`nvcc -cubin`, each a copy of kernels/axpy_nvrtc with its compiler line
set): launch, numerics, and the edit loop. A device-code edit recompiles only
the cubin, a host-launcher edit only the launcher library, a header edit
gives the new result every time (0 stale), and a compile error keeps the
previous op. Numerics of every kernel (the nvcc -cubin variant of
axpy_nvrtc too) are also covered by test_gpu_ops.py. Run on a CUDA machine
(the nvcc-cubin half skips, saying so, without the toolkit):
`python -m pytest -m gpu tests/test_gpu_device_paths.py -v`.
"""
from __future__ import annotations

import pytest
import torch

import registry
from conftest import KernelCopy, _counter
from device_build_helpers import PATHS, copy_example

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(params=PATHS)
def device_copy(request, kernels_root) -> KernelCopy:
    return copy_example(kernels_root, request.param, f"_t{next(_counter)}")


def _value(op, x=1.0, y=2.0, alpha=3.0, n=1 << 12, dtype=torch.float32) -> float:
    xs = torch.full((n,), x, device="cuda", dtype=dtype)
    ys = torch.full((n,), y, device="cuda", dtype=dtype)
    out = op(xs, ys, alpha)
    torch.cuda.synchronize()
    assert torch.all(out == out[0]), "every element (vector body and scalar tail) must agree"
    return float(out[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 17, 1 << 16, (1 << 20) + 3])
def test_launches_and_matches_the_reference(device_copy, dtype, n):
    op = registry.get(device_copy.name, device="cuda")
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=gen).to("cuda", dtype)
    y = torch.randn(n, generator=gen).to("cuda", dtype)
    out = op(x, y, 0.5)
    expected = (0.5 * x.double() + y.double()).to(dtype)
    torch.testing.assert_close(out, expected, atol=1e-2 if dtype != torch.float32 else 1e-6, rtol=1e-2)


def test_misaligned_views_take_the_scalar_kernel(device_copy):
    op = registry.get(device_copy.name, device="cuda")
    base = torch.randn(1 << 16 + 1, device="cuda")
    x, y = base[1:], torch.randn(base.numel() - 1, device="cuda")
    torch.testing.assert_close(op(x, y, 2.0), 2.0 * x + y)


def test_status_names_the_device_compiler(device_copy):
    registry.get(device_copy.name, device="cuda")
    status = registry.status(device_copy.name, device="cuda")
    assert status.device is not None, status
    if device_copy.compiler == "nvrtc":
        assert status.device.startswith("nvrtc "), status.device
        assert "device code: nvrtc" in str(status)
    else:
        assert status.device.startswith("nvcc -cubin "), status.device
        assert "cubin key" in status.device


def test_device_edit_rebuilds_only_the_cubin(device_copy, compiles):
    op = registry.get(device_copy.name, device="cuda")
    assert _value(op) == 5.0
    before = len(compiles(device_copy.name))
    device_copy.edit("axpy_device.cu", "axpy_element(alpha, kreg::to_float(xv[u].lane[l])",
                     "1.0f + axpy_element(alpha, kreg::to_float(xv[u].lane[l])")
    device_copy.edit("axpy_device.cu", "out[i] = kreg::from_float<T>(axpy_element(",
                     "out[i] = kreg::from_float<T>(1.0f + axpy_element(")
    assert registry.get(device_copy.name, device="cuda") is op
    assert _value(op) == 6.0
    assert compiles(device_copy.name)[before:] == [], "the host launcher library must not be rebuilt"
    assert registry.status(device_copy.name, device="cuda").compiled == ["device"]


def test_header_edits_are_never_stale(device_copy):
    op = registry.get(device_copy.name, device="cuda")
    for bias in range(1, 8):
        device_copy.path(device_copy.config).write_text(
            f"#pragma once\n#define AXPY_BIAS {bias}.0f\n#define AXPY_VECTORS_PER_THREAD 4\n")
        registry.get(device_copy.name, device="cuda")
        assert _value(op) == 5.0 + bias, f"stale result after header edit {bias}"


def test_host_launcher_edit_rebuilds_only_the_launchers(device_copy):
    op = registry.get(device_copy.name, device="cuda")
    assert _value(op) == 5.0
    # Force the scalar kernel for everything: same result, different launch path.
    device_copy.edit("axpy_launch.cpp", "if (aligned(x.data) && aligned(y.data) && aligned(out.data)) {",
                     "if (false) {")
    registry.get(device_copy.name, device="cuda")
    assert registry.status(device_copy.name, device="cuda").compiled == ["lib"]
    assert _value(op, alpha=4.0) == 6.0


def test_a_device_compile_error_keeps_the_previous_op(device_copy):
    from registry.errors import BuildError

    op = registry.get(device_copy.name, device="cuda")
    device_copy.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return alpha * x + y + AXPY_BIAS + oops;")
    with pytest.raises(BuildError) as caught:
        registry.get(device_copy.name, device="cuda")
    assert caught.value.first.file.endswith("axpy_math.h")
    assert _value(op) == 5.0
