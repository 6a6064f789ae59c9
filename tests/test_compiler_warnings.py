"""A build that succeeds shows what its compilers warned (ptxas's spills, nvcc's
and the host compiler's warnings) once, as a CompilerWarning, and a cached get
says nothing (registry/builder/compiler_warnings.py). CUDA compiles run without
a GPU: nvcc through load() for TORCH_CUDA_ARCH_LIST, and nvcc -cubin."""
from __future__ import annotations

import warnings
from pathlib import Path

import registry
from device_build_helpers import NEEDS_NVCC, build, copy_example, store  # noqa: F401 (store: a fixture)
from registry import _core
from registry.builder import compiler_warnings
from registry.errors import CompilerWarning

# ptxas warns of spills only when asked (-warn-spills); 24 registers is sm_90's floor.
SPILLS = """
extern "C" __global__ void __launch_bounds__(1024) spills(float* x) {
  float a[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) a[j] = x[j * threadIdx.x];
  float s = 0;
#pragma unroll
  for (int j = 0; j < 32; ++j)
    for (int q = 0; q < 32; ++q) s += a[j] * a[q] * x[q];
  x[0] = s;
}
"""
SPILL_FLAGS = '"-maxrregcount=24", "-Xptxas=-warn-spills"'


def _compiler_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CompilerWarning)]


def test_the_lines_of_a_warning_are_picked_out():
    output = "\n".join([
        "[1/2] /usr/local/cuda/bin/nvcc -Xptxas=-warn-spills -Wall -c k.cu -o k.cuda.o",
        "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill stores",
        'k.cu(3): warning #177-D: variable "unused" was declared but never referenced',
        "    int unused = 3;",
        "        ^",
        "",
        'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"',
        "k.cpp:4:2: warning: #warning slow path [-Wcpp]",
        "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill stores",
        "[2/2] c++ k.cuda.o -shared -o k.so",
    ])
    assert compiler_warnings.warning_lines(output) == [
        "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill stores",
        'k.cu(3): warning #177-D: variable "unused" was declared but never referenced',
        "    int unused = 3;",
        "        ^",
        "k.cpp:4:2: warning: #warning slow path [-Wcpp]",
    ]
    assert compiler_warnings.warning_lines("[1/1] c++ -Wall -Wextra -c k.cpp\n") == []


def test_a_cpu_build_shows_its_warning_once_and_a_cached_get_none(axpy_copy):
    path = axpy_copy.path("axpy_cpu.cpp")
    path.write_text('#warning "the slow path is on"\n' + path.read_text())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.get(axpy_copy.name, device="cpu")
    said = _compiler_warnings(caught)
    assert len(said) == 1 and "the slow path is on" in said[0] and axpy_copy.name in said[0], said
    assert caught[0].filename == __file__  # shown at the user's get, not inside the registry
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.get(axpy_copy.name, device="cpu")  # unchanged: the hot path
        registry.status(axpy_copy.name, device="cpu")
    assert _compiler_warnings(caught) == []


def test_ptxas_spills_through_load_are_kept(axpy_copy, cuda_toolkit, cache_root):
    from registry.builder import ccache, recipe
    from registry.builder.compile import run_build

    axpy_copy.edit("kernel.toml", 'cflags = ["-O3", "-lineinfo"]', f'cflags = ["-O3", "-lineinfo", {SPILL_FLAGS}]')
    path = axpy_copy.path("axpy.cu")
    path.write_text(path.read_text() + SPILLS + "__global__ void unused_variable() { int unused = 3; }\n")
    manifest = _core.parse_manifest(str(axpy_copy.path("kernel.toml")))
    staging = Path(_core.CacheStore(str(cache_root)).make_staging_dir())
    with ccache.compiler_environment(cache_root, "9.0"):
        result = run_build(recipe.lib_plan(manifest, "cuda", "0" * 32), staging)
    said = "\n".join(result.warnings)
    assert "ptxas warning : Registers are spilled to local memory in function 'spills'" in said, said
    assert 'warning #177-D: variable "unused"' in said, said


@NEEDS_NVCC
def test_nvcc_cubin_spills_are_kept(tmp_path, store):
    kernel = copy_example(tmp_path / "kernels", "nvcc-cubin", "_spills")
    kernel.edit("kernel.toml", '\ncompiler = "nvcc-cubin"', f'\ncompiler = "nvcc-cubin"\ndevice_cflags = [{SPILL_FLAGS}]')
    path = kernel.path("axpy_device.cu")
    path.write_text(path.read_text() + SPILLS)
    artifact = build(kernel, store)
    said = "\n".join(artifact.built.warnings)
    assert "ptxas warning : Registers are spilled to local memory in function 'spills'" in said, said
    cached = build(kernel, store, artifact)
    assert cached.built is None  # a hit compiles nothing, so nothing is said
