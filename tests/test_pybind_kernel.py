"""Hand-written bindings keep working: binding = "pybind" builds the lab's
pattern A (a PYBIND11_MODULE including torch/extension.h) with the kernel, as
one module named after the content key. Slower to iterate on, by design of
that pattern: every edit recompiles torch/extension.h."""
from __future__ import annotations

import pytest
import torch

import registry

BINDING = r"""
#include <torch/extension.h>
#include "axpy.h"

static kreg_tensor view(const torch::Tensor& t) {
  return kreg_tensor{t.data_ptr(), t.numel(), t.dim(), t.sizes().data(), t.strides().data()};
}

torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) {
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.dtype() == y.dtype());
  auto out = torch::empty_like(y);
  TORCH_CHECK(x.scalar_type() == at::kFloat, "this hand-written binding handles float32 only");
  const char* err = axpy_f32(view(out), view(x), view(y), static_cast<float>(alpha), nullptr);
  TORCH_CHECK(err == nullptr, err);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("axpy", &axpy, "axpy"); }
"""


@pytest.mark.slow
def test_pybind_kernel_builds_runs_and_hot_reloads(axpy_copy, compiles):
    axpy_copy.path("axpy_pybind.cpp").write_text(BINDING)
    axpy_copy.edit("kernel.toml", "format = 1",
                   'format = 1\nbinding = "pybind"\nbinding_source = "axpy_pybind.cpp"')
    axpy_copy.edit("kernel.toml", 'dtypes = ["float32", "float16", "bfloat16"]', 'dtypes = ["float32"]')
    op = registry.get(axpy_copy.name, device="cpu")
    x, y = torch.randn(33), torch.randn(33)
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)
    assert compiles(axpy_copy.name) == [(axpy_copy.name, "module")]

    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 2.0f")
    registry.get(axpy_copy.name, device="cpu")
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y + 2)  # a fresh module, same handle
    assert len(compiles(axpy_copy.name)) == 2
