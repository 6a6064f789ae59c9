"""Host launchers compiled by nvcc ([cuda] launcher_compiler = "nvcc"), without
a GPU: a launcher of a cubin that includes <cuda_runtime.h>, uses CUDA's types
and a header that only nvcc compiles (as CUTLASS's host side is) builds, torch-free,
with nvcc's device pass on the cubin's arch; plain c++ cannot build it; the
key covers nvcc and the arch only when nvcc compiles the launchers."""
from __future__ import annotations

import ctypes

import pytest

from device_build_helpers import NEEDS_NVCC, copy_example
from registry import _core, environment
from registry.builder import direct, elf, keys, recipe
from registry.errors import BuildError

pytestmark = NEEDS_NVCC

# What CUTLASS's host side needs of the compiler, in a few lines: nvcc
# (__CUDACC__, as cute's TMA descriptor code tests) and CUDA's host types.
NVCC_ONLY_HEADER = """#pragma once
#ifndef __CUDACC__
#error "this header's host code is compiled by nvcc only"
#endif
#include <cuda_runtime.h>
inline unsigned launch_blocks(dim3 grid) { return grid.x * grid.y * grid.z; }
"""


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    copy = copy_example(tmp_path / "kernels", "nvcc-cubin")
    copy.path("nvcc_only.h").write_text(NVCC_ONLY_HEADER)
    copy.edit("axpy_launch.cpp", '#include "kreg/launch.h"\n',
              '#include "kreg/launch.h"\n#include "nvcc_only.h"\n'
              "static_assert(sizeof(cudaStream_t) == sizeof(void*), \"a CUDA type in a launcher\");\n")
    copy.edit("axpy_launch.cpp", "const auto blocks = static_cast<unsigned>((vectors + per_block - 1) / per_block);",
              "const auto blocks = launch_blocks(dim3(static_cast<unsigned>((vectors + per_block - 1) / per_block)));")
    return copy


def with_launcher_compiler(kernel, compiler: str):
    kernel.edit("kernel.toml", '\ncompiler = "nvcc-cubin"', f'\ncompiler = "nvcc-cubin"\nlauncher_compiler = "{compiler}"')
    return _core.parse_manifest(str(kernel.path("kernel.toml")))


def build(manifest, tmp_path, commands, monkeypatch, cuda_arch="9.0a"):
    run = direct._run

    def recording(command, *args, **kwargs):
        commands.append(command)
        return run(command, *args, **kwargs)

    monkeypatch.setattr(direct, "_run", recording)
    staging = tmp_path / "staging"
    staging.mkdir(exist_ok=True)
    plan = recipe.lib_plan(manifest, "cuda", "ab" * 16, cuda_arch=cuda_arch)
    return plan, direct.build(plan, staging)


def test_a_launcher_with_cuda_headers_builds_with_nvcc(kernel, tmp_path, monkeypatch):
    manifest = with_launcher_compiler(kernel, "nvcc")
    commands = []
    plan, result = build(manifest, tmp_path, commands, monkeypatch)
    compile_step = next(c for c in commands if "-c" in c)
    assert compile_step[0] == environment.nvcc_command() and compile_step[1:3] == ["-x", "cu"]
    assert "-arch=sm_90a" in compile_step  # the device pass on the cubin's arch
    library = result.staging / result.artifact
    needed = elf.needed_libraries(str(library))
    assert not any("torch" in n or "c10" in n or "cudart" in n for n in needed), needed  # static runtime
    assert any(d.endswith("nvcc_only.h") for d in result.deps)  # the header is a recorded dependency
    ctypes.CDLL(str(library))  # loads without torch or a GPU (the runtime starts lazily)


def test_plain_cxx_cannot_build_it(kernel, tmp_path, monkeypatch):
    manifest = with_launcher_compiler(kernel, "c++")
    with pytest.raises(BuildError, match="compiled by nvcc only"):
        build(manifest, tmp_path, [], monkeypatch)


def test_the_key_covers_nvcc_and_the_arch_only_for_nvcc_launchers(kernel):
    env = {"toolchain.nvcc": "nvcc 13.0", "env.cuda_arch": "9.0a", "env.torch": "2.x", "toolchain.cxx": "g++"}
    plain = _core.parse_manifest(str(kernel.path("kernel.toml")))
    files, _ = keys.kernel_files(plain, "cuda")
    names = {i.name for i in keys.kernel_lib_key(plain, "cuda", files, env).inputs}
    assert "toolchain.nvcc" not in names and "env.cuda_arch" not in names
    nvcc = with_launcher_compiler(kernel, "nvcc")
    first = keys.kernel_lib_key(nvcc, "cuda", files, env)
    values = {i.name: i.value for i in first.inputs}
    assert values["toolchain.nvcc"] == "nvcc 13.0" and values["env.cuda_arch"] == "9.0a"
    assert values["launcher_compiler"] == "nvcc" and "env.torch" not in values
    assert keys.kernel_lib_key(nvcc, "cuda", files, {**env, "env.cuda_arch": "9.0"}).hex != first.hex


def test_launcher_compiler_needs_a_cubin(tmp_path):
    kernel = copy_example(tmp_path / "kernels", "nvcc-cubin")
    kernel.edit("kernel.toml", '\ncompiler = "nvcc-cubin"\n', '\nlauncher_compiler = "nvcc"\n')
    kernel.edit("kernel.toml", 'device_sources = ["axpy_device.cu"]\n', "")
    with pytest.raises(_core.ManifestError, match="launcher_compiler"):
        _core.parse_manifest(str(kernel.path("kernel.toml")))
