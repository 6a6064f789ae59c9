"""A launcher that disagrees with its signature gives the same message on
every build path: g++'s "conflicting declaration" (tests/test_launcher_checks.py)
and nvcc's "more than one instance of overloaded function ... has "C"
linkage". nvcc compiles here without a GPU; skipped where it is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from registry import _core
from registry.builder.failure import build_error
from registry.builder.step import BuildPlan

from conftest import CHECKOUT

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)

ROWSTAT_TOML = '''format = 1
[cuda]
sources = ["rowstat.cu"]
[[op]]
signature = "rowstat(Tensor x, Tensor? w, float scale=2.0, *, int offset=0) -> Tensor y"
dtypes = ["float32"]
same_shape = []
outputs = { y = "float32[x.shape[:-1]]" }
'''

# What a new user writes: the scale as double, as Python passes it.
ROWSTAT_CU = '''#include "kreg/abi.h"
KREG_API const char* rowstat_f32(kreg_tensor y, kreg_tensor x, kreg_tensor w, double scale, int64_t offset,
                                 void* stream) {
  return nullptr;
}
'''


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed: it only compiles)")
def test_nvcc_launcher_mismatch_names_op_parameter_and_both_types(tmp_path):
    (tmp_path / "kernel.toml").write_text(ROWSTAT_TOML)
    source = tmp_path / "rowstat.cu"
    source.write_text(ROWSTAT_CU)
    manifest = _core.parse_manifest(str(tmp_path / "kernel.toml"))
    header = tmp_path / "launchers.h"
    header.write_text(_core.generate_launcher_header(manifest.name, list(manifest.ops)))
    done = subprocess.run([NVCC, "-arch=sm_90", "-std=c++17", "-c", "-include", str(header),
                           "-I", str(CHECKOUT / "registry" / "include"), str(source), "-o", str(tmp_path / "o.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    log = done.stdout + done.stderr
    assert 'has "C" linkage' in log, log  # what nvcc says, and all it says
    plan = BuildPlan(kernel=manifest.name, backend="cuda", kind="kernel-lib", module_name="kreg_rowstat_cuda",
                     sources=[str(source)], ops=list(manifest.ops), manifest_file=str(tmp_path / "kernel.toml"))
    error = build_error(plan, log, tmp_path)
    assert "op rowstat, launcher rowstat_f32: parameter 4 (float scale) must be float but the launcher takes double" \
        in str(error), str(error)
    assert "needs (kreg_tensor y, kreg_tensor x, kreg_tensor w, float scale, int64_t offset, void* stream)" \
        in str(error), str(error)
    assert error.first.file == str(source) and error.first.line == 2, error.first
