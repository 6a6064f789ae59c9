"""A CUDA kernel built on CuTe from the installed nvidia-cutlass wheel
(header_packages, tests/test_header_packages.py), run on the GPU: the nvcc
path through load() finds the package's headers and the op computes."""
from __future__ import annotations

import importlib.metadata

import pytest
import torch

import registry

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not any(d.metadata["Name"] == "nvidia-cutlass" for d in importlib.metadata.distributions()),
                       reason="nvidia-cutlass is not installed (pip install nvidia-cutlass)"),
]

MANIFEST = """format = 1
header_packages = ["nvidia-cutlass"]

[cuda]
sources = ["k.cu"]

[[op]]
signature = "{name}(Tensor x) -> Tensor"
"""

# out(r, c) = 2 * x(c, r) for a square matrix, indexed through CuTe layouts.
SOURCE = """#include <cute/tensor.hpp>
#include "kreg/cuda.cuh"

__global__ void transpose_twice(const float* x, float* out, int n) {
  using namespace cute;
  auto rows = make_layout(make_shape(n, n), GenRowMajor{});
  auto cols = make_layout(make_shape(n, n), GenColMajor{});
  Tensor in = make_tensor(make_gmem_ptr(x), cols);
  Tensor o = make_tensor(make_gmem_ptr(out), rows);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n * n) o(i / n, i % n) = 2.0f * in(i / n, i % n);
}

KREG_API const char* NAME_f32(kreg_tensor out, kreg_tensor x, void* stream) {
  int n = static_cast<int>(x.sizes[0]);
  transpose_twice<<<(n * n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const float*>(x.data), static_cast<float*>(out.data), n);
  return kreg::last_launch_error();
}
"""


def test_a_cute_kernel_runs(kernels_root, cache_root):
    name = "cute_transpose_gpu"
    folder = kernels_root / name
    folder.mkdir()
    (folder / "kernel.toml").write_text(MANIFEST.format(name=name))
    (folder / "k.cu").write_text(SOURCE.replace("NAME", name))
    x = torch.randn(33, 33, device="cuda")
    out = registry.get(name, device="cuda")(x)
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x.t())
    entry = registry._core.CacheStore(str(cache_root)).lookup(registry.status(name, device="cuda").key).entry
    inputs = {i.name: i.value for i in entry.inputs}
    assert inputs["package:nvidia-cutlass"] == importlib.metadata.version("nvidia-cutlass")
    assert "file:pkg:nvidia-cutlass/source/include/cute/tensor.hpp" in inputs
