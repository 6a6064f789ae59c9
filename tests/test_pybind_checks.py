"""A hand-written pybind binding gets the manifest's input checks: what the
generated binding refuses (dtype, contiguity, device) is refused before the
module's function runs, with the generated binding's messages. The binding
below checks nothing itself, as many a lab's does not: without the handle's
checks, a strided y or a float64 x reaches axpy_f32 and gives wrong numbers."""
from __future__ import annotations

import pytest
import torch

import registry

UNCHECKED_BINDING = r"""
#include <torch/extension.h>
#include "axpy.h"

static kreg_tensor view(const torch::Tensor& t) {
  return kreg_tensor{t.data_ptr(), t.numel(), t.dim(), t.sizes().data(), t.strides().data()};
}

torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) {
  auto out = torch::empty_like(y);
  const char* err = axpy_f32(view(out), view(x), view(y), static_cast<float>(alpha), nullptr);
  TORCH_CHECK(err == nullptr, err);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("axpy", &axpy, "axpy"); }
"""


def _pybind_axpy(copy):
    copy.path("axpy_pybind.cpp").write_text(UNCHECKED_BINDING)
    copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "pybind"\nbinding_source = "axpy_pybind.cpp"')
    copy.edit("kernel.toml", 'dtypes = ["float32", "float16", "bfloat16"]', 'dtypes = ["float32"]')
    return copy


@pytest.fixture(scope="module")
def pybind_axpy(kernels_root):
    from conftest import KernelCopy

    copy = _pybind_axpy(KernelCopy(kernels_root, "axpy", "axpy_pybind_checks"))
    return copy, registry.get(copy.name, device="cpu")


@pytest.mark.slow
def test_a_dtype_the_manifest_does_not_list_is_refused(pybind_axpy):
    copy, op = pybind_axpy
    x = torch.randn(8, dtype=torch.float64)
    with pytest.raises(registry.RegistryError) as info:
        op(x, x, 1.5)
    assert isinstance(info.value, RuntimeError)
    assert str(info.value) == (f"{copy.name}.axpy: dtype Double is not supported; "
                               f"the manifest lists float32 (for 'x')")
    with pytest.raises(registry.RegistryError, match=r"argument 'y' is Half but 'x' is Float; convert one of them"):
        op(torch.randn(8), torch.randn(8, dtype=torch.half), 1.5)


@pytest.mark.slow
def test_a_strided_input_is_refused_not_read_wrong(pybind_axpy):
    copy, op = pybind_axpy
    x, y = torch.randn(8), torch.randn(16)[::2]
    with pytest.raises(registry.RegistryError) as info:
        op(x, y, 1.5)
    assert str(info.value) == (f"{copy.name}.axpy: argument 'y' is not contiguous (sizes [8], strides [2]); "
                               f"pass .contiguous() (the op never copies implicitly)")
    torch.testing.assert_close(op(x, y.contiguous(), 1.5), 1.5 * x + y)


@pytest.mark.slow
def test_a_tensor_on_another_device_is_refused(pybind_axpy):
    copy, op = pybind_axpy
    x = torch.randn(8)
    with pytest.raises(registry.RegistryError, match=(
            rf"^{copy.name}\.axpy: argument 'y' is on meta but this build of the op runs on the CPU; "
            r"move it with \.cpu\(\) \(the op never copies implicitly\)$")):
        op(x, torch.empty(8, device="meta"), 1.5)


def test_the_checks_follow_an_edited_manifest(kernels_root):
    """No build: a handle on a plain function, as load.py swaps a module's in."""
    from conftest import KernelCopy

    from registry import _core
    from registry.op import Op

    copy = _pybind_axpy(KernelCopy(kernels_root, "axpy", "axpy_pybind_checks_edit"))
    manifest = _core.parse_manifest(str(copy.path("kernel.toml")))
    op = Op.of(copy.name, manifest.ops[0])
    op._swap(lambda x, y, alpha: alpha * x + y, None, "cpu", "key")
    half = torch.randn(8, dtype=torch.half)
    with pytest.raises(registry.RegistryError, match="dtype Half is not supported; the manifest lists float32 "):
        op(half, half, 1.5)
    copy.edit("kernel.toml", 'dtypes = ["float32"]', 'dtypes = ["float32", "float16"]')
    op._set_spec(_core.parse_manifest(str(copy.path("kernel.toml"))).ops[0])
    torch.testing.assert_close(op(half, half, 1.5), 2.5 * half)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_pybind_op_refuses_a_cpu_tensor(kernels_root):
    from conftest import KernelCopy

    copy = _pybind_axpy(KernelCopy(kernels_root, "axpy", "axpy_pybind_checks_cuda"))
    op = registry.get(copy.name, device="cuda")
    x = torch.randn(8, device="cuda")
    with pytest.raises(registry.RegistryError, match=(
            r"argument 'y' is on cpu but this build of the op runs on CUDA; move it with \.cuda\(\)")):
        op(x, torch.randn(8), 1.5)
    torch.testing.assert_close(op(x, x, 1.5), 2.5 * x)
