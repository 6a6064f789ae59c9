"""kreg/launch.h on a GPU: a kernel using more than 48 KB of dynamic shared
memory (the limit is raised by the launch runtime) and a 2x1x1 thread block
cluster (cuLaunchKernelEx), whose blocks report their %cluster_ctarank and
%cluster_nctarank. The cubin comes from NVRTC for the device's arch, the
launcher is plain C++ with the launch runtime, bound as a `get` binds it.
Run on a CUDA machine: `python -m pytest -m gpu tests/test_gpu_launch_attributes.py -v`."""
from __future__ import annotations

import ctypes
import subprocess

import pytest
import torch

from registry.builder import keys

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

DEVICE = r"""
extern "C" __global__ void big_shared(int* out, int n) {
  extern __shared__ int buffer[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = i;
  __syncthreads();
  int sum = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += buffer[n - 1 - i];
  atomicAdd(out, sum);
}

extern "C" __global__ void cluster_ranks(unsigned* out) {
  unsigned rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = rank;
    out[2 * blockIdx.x + 1] = size;
  }
}
"""

LAUNCHER = r"""
#include "kreg/launch.h"
#define API extern "C" __attribute__((visibility("default")))
API const char* run_big_shared(void* out, int n, unsigned shared, void* stream) {
  void* args[] = {&out, &n};
  return kreg_launch("big_shared", kreg_dim3{1, 1, 1}, kreg_dim3{256, 1, 1}, shared, stream, args);
}
API const char* run_cluster_ranks(void* out, unsigned blocks, void* stream) {
  void* args[] = {&out};
  return kreg_launch_cluster("cluster_ranks", kreg_dim3{blocks, 1, 1}, kreg_dim3{32, 1, 1}, kreg_dim3{2, 1, 1},
                             0, stream, args);
}
"""


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    from registry.device import driver_module, nvrtc

    folder = tmp_path_factory.mktemp("launch_attributes")
    major, minor = torch.cuda.get_device_capability()
    cubin, log = nvrtc.load().compile(DEVICE.encode(), "attributes.cu", [f"-arch=sm_{major}{minor}"])
    assert cubin is not None, log
    (folder / "attributes.cubin").write_bytes(cubin)
    (folder / "launcher.cpp").write_text(LAUNCHER)
    subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
                    f"-I{keys.REGISTRY_INCLUDE}", str(folder / "launcher.cpp"), str(keys.LAUNCH_RUNTIME),
                    "-o", str(folder / "liblauncher.so")], check=True)
    library = ctypes.CDLL(str(folder / "liblauncher.so"))
    driver_module.bind(library, "launch-attributes-test", str(folder / "attributes.cubin"))
    library.run_big_shared.restype = library.run_cluster_ranks.restype = ctypes.c_char_p
    library.run_big_shared.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    library.run_cluster_ranks.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p]
    return library


def test_more_than_48_kb_of_dynamic_shared_memory(launcher):
    shared = 160 * 1024  # above the default 48 KB, within every GPU from sm_80 on (163 KB opt-in)
    n = shared // 4
    for _ in range(2):  # the second launch finds the limit already raised
        out = torch.zeros(1, dtype=torch.int32, device="cuda")
        error = launcher.run_big_shared(out.data_ptr(), n, shared, torch.cuda.current_stream().cuda_stream)
        assert error is None, error
        torch.cuda.synchronize()
        assert int(out.item()) == n * (n - 1) // 2  # every element read back: 838 840 320 fits an int32


def test_too_much_shared_memory_names_the_kernel_and_the_size(launcher):
    error = launcher.run_big_shared(torch.zeros(1, dtype=torch.int32, device="cuda").data_ptr(), 1, 1 << 20,
                                    torch.cuda.current_stream().cuda_stream)
    assert error is not None and b'"big_shared"' in error and str(1 << 20).encode() in error


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9,
                    reason="clusters need sm_90 or later")
def test_a_two_block_cluster(launcher):
    blocks = 8
    out = torch.full((2 * blocks,), 99, dtype=torch.int32, device="cuda")
    error = launcher.run_cluster_ranks(out.data_ptr(), blocks, torch.cuda.current_stream().cuda_stream)
    assert error is None, error
    torch.cuda.synchronize()
    pairs = out.view(blocks, 2).tolist()
    assert pairs == [[b % 2, 2] for b in range(blocks)]
