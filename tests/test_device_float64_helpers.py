"""kreg's float bridging in device code and float64: to_acc / from_acc keep
double as double (NVRTC and nvcc alike), while to_float(double) and
from_float<double> are refused when they compile, with a message naming what
to use, instead of a silent narrowing or ptxas's "Unresolved extern function".
NVRTC compiles without a GPU; the nvcc case is skipped without nvcc."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import KernelCopy, CHECKOUT
from registry import _core
from registry.device import cubin_build as device_build
from registry.errors import BuildError

ARCH = "9.0"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)

ROUND_TRIP = '''
extern "C" __global__ void f64_round_trip(const double* x, double* out) {
  out[threadIdx.x] = kreg::from_acc<double>(kreg::to_acc(x[threadIdx.x]) * 2.0);
}
'''
FROM_FLOAT = '''
extern "C" __global__ void f64_from_float(const float* x, double* out) {
  out[threadIdx.x] = kreg::from_float<double>(x[threadIdx.x]);
}
'''
TO_FLOAT = '''
extern "C" __global__ void f64_to_float(const double* x, float* out) {
  out[threadIdx.x] = kreg::to_float(x[threadIdx.x]);
}
'''


def _nvrtc_build(tmp_path, extra: str):
    kernel = KernelCopy(tmp_path / "kernels", "axpy_nvrtc", "axpy_nvrtc")
    path = kernel.path("axpy_device.cu")
    path.write_text(path.read_text() + extra)
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    return device_build.ensure(_core.CacheStore(str(tmp_path / "cache")), manifest, ARCH, None,
                               trust_memo=False, force=False)


def test_nvrtc_to_acc_and_from_acc_keep_double(tmp_path):
    assert _nvrtc_build(tmp_path, ROUND_TRIP).path


@pytest.mark.parametrize("code, helper", [(FROM_FLOAT, "from_float"), (TO_FLOAT, "to_float")])
def test_nvrtc_refuses_float_helpers_on_double_naming_to_acc_and_from_acc(tmp_path, code, helper):
    with pytest.raises(BuildError) as caught:
        _nvrtc_build(tmp_path, code)
    message = str(caught.value)
    assert f"kreg::{helper}" in message and "to_acc" in message and "from_acc" in message, caught.value.log
    assert "Unresolved extern" not in caught.value.log


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed: it only compiles)")
@pytest.mark.parametrize("code, helper, ok", [(ROUND_TRIP, None, True), (FROM_FLOAT, "from_float", False),
                                              (TO_FLOAT, "to_float", False)])
def test_nvcc_kernels_get_the_same_helpers(tmp_path, code, helper, ok):
    source = tmp_path / "k.cu"
    source.write_text('#include "kreg/cuda.cuh"\n' + code)
    done = subprocess.run([NVCC, "-arch=sm_90", "-std=c++17", "-cubin", "-I", str(CHECKOUT / "registry" / "include"),
                           "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                           "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                           str(source), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    if ok:
        assert done.returncode == 0, log
    else:
        assert done.returncode != 0, f"kreg::{helper} on double compiled"
        assert f"kreg::{helper}" in log and "to_acc" in log and "from_acc" in log, log
