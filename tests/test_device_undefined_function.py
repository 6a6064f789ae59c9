"""A __device__ function declared but defined nowhere: ptxas stops with
"Unresolved extern function '_Z...'", a mangled name and no place. The build
error names the function as written and points at its declaration, on both
device paths (NVRTC and nvcc -cubin), and on the host path's nvcc."""
from __future__ import annotations

import pytest

from device_build_helpers import PATHS, build, copy_example, make_store
from registry.builder import link_errors
from registry.errors import BuildError

DECLARATION = "__device__ float axpy_missing(float x, float y);\n"


@pytest.mark.parametrize("compiler", PATHS)
def test_an_undefined_device_function_is_named_at_its_declaration(tmp_path, monkeypatch, compiler):
    store = make_store(tmp_path, monkeypatch)
    kernel = copy_example(tmp_path / "kernels", compiler)
    kernel.edit("axpy_math.h", "AXPY_HD float axpy_element", DECLARATION + "AXPY_HD float axpy_element")
    kernel.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return axpy_missing(alpha * x, y) + AXPY_BIAS;")
    with pytest.raises(BuildError) as caught:
        build(kernel, store)
    first = caught.value.first
    assert first is not None, caught.value.log
    lines = kernel.path("axpy_math.h").read_text().splitlines()
    assert first.file.endswith("axpy_math.h") and lines[first.line - 1] == DECLARATION.strip(), first
    assert "axpy_missing(float, float)" in first.message and "_Z" not in first.message, first.message
    assert "__device__" in first.message and "rdc" in first.message, first.message


def test_ptxas_unresolved_extern_is_read_as_an_undefined_symbol():
    log = "ptxas fatal   : Unresolved extern function '_Z12axpy_missingff'\n"
    assert link_errors.undefined_symbols(log) == ["axpy_missing(float, float)"]


HOST_TOML = '''format = 1
[cuda]
sources = ["scale.cu"]
[[op]]
signature = "scale(Tensor x) -> Tensor"
dtypes = ["float32"]
'''

HOST_CU = '''#include "helper.cuh"
__global__ void scale_kernel(float* x) { x[0] = helper(x[0], 2.0f); }
'''


def test_the_host_paths_nvcc_names_it_too(tmp_path):
    """A [cuda] source nvcc compiles (no GPU needed): the same ptxas stop."""
    import shutil
    import subprocess

    from registry import _core, environment
    from registry.builder.failure import build_error
    from registry.builder.step import BuildPlan

    nvcc = environment.nvcc_command()
    if not shutil.which(nvcc):
        pytest.skip(f"needs nvcc (looked for {nvcc})")
    (tmp_path / "kernel.toml").write_text(HOST_TOML)
    (tmp_path / "helper.cuh").write_text("#pragma once\n__device__ float helper(float a, float b);\n")
    source = tmp_path / "scale.cu"
    source.write_text(HOST_CU)
    done = subprocess.run([nvcc, "-arch=sm_90", "-c", str(source), "-o", str(tmp_path / "o.o")],
                          capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode != 0 and "Unresolved extern function" in log, log
    manifest = _core.parse_manifest(str(tmp_path / "kernel.toml"))
    plan = BuildPlan(kernel=manifest.name, backend="cuda", kind="kernel-lib", module_name="kreg_scale_cuda",
                     sources=[str(source)], include_paths=[str(tmp_path)], ops=list(manifest.ops),
                     manifest_file=str(tmp_path / "kernel.toml"))
    first = build_error(plan, log, tmp_path).first
    assert first is not None and first.file == str(tmp_path / "helper.cuh") and first.line == 2, first
    assert "helper(float, float)" in first.message and "_Z" not in first.message, first.message
