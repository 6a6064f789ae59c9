"""The flags a kernel library is compiled with: what the manifest says reaches
every compiler it names, and the default CPU flags let half conversions use
the hardware. Both change the key exactly when they change the build.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from registry import _core
from registry.builder import ccache, recipe, keys
from registry.builder.compile import run_build

TOP_LEVEL = 'cflags = ["-DAXPY_TOP_LEVEL_FLAG=1", "-fno-math-errno"]'
GUARD = '#ifndef AXPY_TOP_LEVEL_FLAG\n#error "the manifest\'s top-level cflags did not reach this unit"\n#endif\n'


def _guarded_copy(copy, source: str):
    copy.edit("kernel.toml", 'reference = "reference.py"', f'reference = "reference.py"\n{TOP_LEVEL}')
    path = copy.path(source)
    path.write_text(GUARD + path.read_text())
    return _core.parse_manifest(str(copy.path("kernel.toml")))


def test_top_level_cflags_reach_nvcc(axpy_copy, cuda_toolkit, cache_root, tmp_path):
    manifest = _guarded_copy(axpy_copy, "axpy.cu")
    plan = recipe.lib_plan(manifest, "cuda", "0" * 32)
    staging = tmp_path / "staging"
    staging.mkdir()
    with ccache.compiler_environment(cache_root, os.environ["TORCH_CUDA_ARCH_LIST"]):
        result = run_build(plan, staging)  # the guard is an #error without the flag
    assert (staging / result.artifact).is_file()


def test_top_level_cflags_reach_cpu_units(axpy_copy):
    import registry

    _guarded_copy(axpy_copy, "axpy_cpu.cpp")
    registry.get(axpy_copy.name, device="cpu")  # the guard is an #error without the flag


def test_aot_package_gives_top_level_cflags_to_nvcc(tmp_path, axpy_copy):
    from registry.tools import aot

    _guarded_copy(axpy_copy, "axpy.cu")
    package = aot.export_package(axpy_copy.name, tmp_path / "pkg", backends=["cuda"])
    nvcc_flags = json.loads((package / "kreg_build_spec.json").read_text())["nvcc_flags"]
    assert "-DAXPY_TOP_LEVEL_FLAG=1" in nvcc_flags and "-forward-unknown-to-host-compiler" in nvcc_flags


def test_binding_key_ignores_the_kernel_library_recipe():
    manifest = _core.parse_manifest(str(Path(keys.__file__).resolve().parents[2] / "kernels/axpy/kernel.toml"))
    env = {"env.torch": "t", "toolchain.kernel_lib": "one"}
    assert manifest.ops  # any op: the binding's key names none
    assert keys.binding_key("cpu", env).hex == keys.binding_key("cpu", {**env, "toolchain.kernel_lib": "two"}).hex


def _host_has_f16c() -> bool:
    import platform

    if platform.machine() != "x86_64":
        return False
    with open("/proc/cpuinfo") as cpuinfo:
        return any(line.startswith("flags") and "f16c" in line.split() for line in cpuinfo)


@pytest.mark.skipif(not _host_has_f16c(), reason="the CPU has no F16C")
def test_cpu_half_conversions_use_f16c(axpy_copy, cache_root):
    import shutil
    import subprocess

    import registry
    from registry import environment

    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed")
    registry.get(axpy_copy.name, device="cpu")
    lib = registry.status(axpy_copy.name, device="cpu").artifacts["kernel library"]
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", lib], capture_output=True, text=True,
                          check=True).stdout
    assert "vcvtph2ps" in code and "vcvtps2ph" in code, "float16 conversions are not F16C instructions"
    assert "__extendhfsf2" not in code and "__truncsfhf2" not in code, "float16 goes through soft-float calls"
    # The flag is in the key: a library built without it is not reused, nor this one where it cannot run.
    assert "-mf16c" in environment.build_environment("cpu", cache_root)["toolchain.kernel_lib"]
