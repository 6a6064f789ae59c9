"""Arch-specific targets ([cuda] arch_specific = true: sm_90a on a 9.0 GPU)
without a GPU: the arch list of the key, both cubin paths' -arch and the
compiler's feature macro, the kernel-library path's nvcc command line, and
the build error for device code CUTLASS compiled to its "Arch conditional"
printf (a kernel that would run and write nothing)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from device_build_helpers import NEEDS_NVCC, PATHS, copy_example, cubin, inputs, store  # noqa: F401 (a fixture)
from registry import _core, environment, knobs
from registry.builder import arch_check
from registry.device import cubin_build
from registry.errors import ArchTargetError

# A device source whose kernel's name says whether the arch-specific feature
# macro was on, and which prints CUTLASS's message where it was not (as a
# CUTLASS sm90 GEMM compiled for sm_90 does).
FEATURE_SOURCE = r"""
#include "axpy_device.cu"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
extern "C" __global__ void feature_sm90a_on(int* out) { out[0] = 1; }
#else
extern "C" __global__ void feature_sm90a_off(int* out) {
  printf("ERROR : Arch conditional MMA instruction used without targeting appropriate compute capability. Aborting.\n");
  out[0] = 0;
}
#endif
"""


def feature_kernel(tmp_path, compiler: str, arch_specific: bool):
    kernel = copy_example(tmp_path / "kernels", compiler)
    kernel.path("feature.cu").write_text(FEATURE_SOURCE)
    line = 'device_sources = ["feature.cu"]' + ("\narch_specific = true" if arch_specific else "")
    kernel.edit("kernel.toml", 'device_sources = ["axpy_device.cu"]', line)
    return kernel


def cubin_for(kernel, store, monkeypatch, arch_list: str = "9.0"):
    """The cubin as a `get` builds it: the arch from the manifest's environment."""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch_list)
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    env = environment.build_environment_for(manifest, "cuda", knobs.cache_dir())
    return env, cubin_build.ensure(store, manifest, env["env.cuda_arch"], None, trust_memo=False, force=False)


def cubin_arch(data: bytes) -> str:
    """The target of a cubin as its toolkit note records it ("-arch sm_90a")."""
    found = re.search(rb"-arch (sm_\d+[af]?)", data)
    assert found is not None, "no -arch in the cubin's notes"
    return found.group(1).decode()


def test_the_arch_list_names_arch_specific_variants_from_9_0_on():
    assert environment.arch_specific_list("9.0") == "9.0a"
    assert environment.arch_specific_list("8.0;9.0+PTX") == "8.0;9.0a+PTX"
    assert environment.arch_specific_list("8.6 10.0 12.0") == "8.6;10.0a;12.0a"
    assert environment.arch_specific_list("9.0a;10.0f") == "9.0a;10.0f"


def test_the_cubin_target_keeps_the_suffix():
    assert cubin_build.target_arch("9.0a") == "sm_90a"
    assert cubin_build.target_arch("8.0;9.0a+PTX") == "sm_90a"
    assert cubin_build.target_arch("9.0;9.0a") == "sm_90a"
    assert cubin_build.target_arch("10.0f") == "sm_100f"


@pytest.mark.parametrize("compiler", PATHS)
def test_arch_specific_builds_sm_90a_with_the_feature_macro_on(tmp_path, store, monkeypatch, compiler):
    plain_kernel = feature_kernel(tmp_path / "plain", compiler, arch_specific=False)
    kernel = feature_kernel(tmp_path / "specific", compiler, arch_specific=True)
    env, built = cubin_for(kernel, store, monkeypatch)
    assert env["env.cuda_arch"] == "9.0a"
    assert "-arch=sm_90a" in inputs(built)["flags.device"]
    data = cubin(built)
    assert cubin_arch(data) == "sm_90a"
    assert b"feature_sm90a_on" in data and b"feature_sm90a_off" not in data
    # The same sources built for the plain arch: another key, and the error below.
    with pytest.raises(ArchTargetError):
        cubin_for(plain_kernel, store, monkeypatch)
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    compiler = cubin_build.device_compiler(manifest)
    plain_key = cubin_build.device_key(manifest, _snapshot(manifest, compiler), "sm_90", compiler)
    assert plain_key.hex != built.key


def _snapshot(manifest, compiler):
    snapshot = cubin_build.Snapshot(manifest)
    for path in cubin_build.scan_files(manifest, [], compiler):
        snapshot.add(path)
    return snapshot


@pytest.mark.parametrize("compiler", PATHS)
def test_code_compiled_to_cutlass_arch_printf_fails_the_build_naming_the_key(tmp_path, store, monkeypatch, compiler):
    kernel = feature_kernel(tmp_path, compiler, arch_specific=False)
    with pytest.raises(ArchTargetError) as caught:
        cubin_for(kernel, store, monkeypatch)
    message = str(caught.value)
    assert "arch_specific = true" in message and str(kernel.path("kernel.toml")) in message
    assert "Arch conditional MMA instruction" in message and "sm_90" in message
    assert not list((tmp_path / "cache").glob("v1/objects/*/*.cubin"))  # nothing published


@pytest.mark.parametrize("compiler", PATHS)
def test_below_9_0_the_plain_arch_is_built_and_the_macro_is_off(tmp_path, store, monkeypatch, compiler):
    """No arch-specific variant on an 8.0 GPU: the plain arch, where the
    kernel's fallback (the feature macro off) is what the code tests."""
    kernel = feature_kernel(tmp_path, compiler, arch_specific=True)
    kernel.path("feature.cu").write_text(FEATURE_SOURCE.replace(
        '  printf("ERROR : Arch conditional MMA instruction used without targeting appropriate compute '
        'capability. Aborting.\\n");\n', ""))
    env, built = cubin_for(kernel, store, monkeypatch, arch_list="8.0")
    assert env["env.cuda_arch"] == "8.0" and cubin_arch(cubin(built)) == "sm_80"
    assert b"feature_sm90a_off" in cubin(built)


def test_the_message_for_a_gpu_without_a_variant_says_what_can_run():
    image = b"\0ERROR : Arch conditional MMA instruction used without targeting sm90a compute capability.\0"
    with pytest.raises(ArchTargetError) as caught:
        arch_check.check_image("k", image, arch="sm_80", manifest_file="k/kernel.toml", what="the device code")
    assert "no target here has an arch-specific variant" in str(caught.value)
    cute = b"\0Trying to use tma without CUTE_ARCH_TMA_SM90_ENABLED.\0"
    with pytest.raises(ArchTargetError, match="arch_specific = true"):
        arch_check.check_image("k", cute, arch="9.0", manifest_file="k/kernel.toml", what="the kernel library")
    arch_check.check_image("k", b"\0plain printf text\0", arch="9.0", manifest_file="f", what="w")


def test_the_message_is_the_printable_text_around_the_marker_and_no_more():
    marker = b"Attempting to use SM90_64x8x16_F16F16F16_SS without CUTE_ARCH_MMA_SM90A_ENABLED"
    image = b"\x01" + b"x" * 300 + marker + b"y" * 200 + b"\0" + b"z" * 50
    message = arch_check.unreachable_code_message(image)
    assert message == (b"x" * (120 - len(b"Attempting to use SM90_64x8x16_F16F16F16_SS")) + marker + b"y" * 80).decode()
    assert arch_check.unreachable_code_message(b"\0head without CUTE_ARCH_TMA_SM90_ENABLED.\x7f tail") == \
        "head without CUTE_ARCH_TMA_SM90_ENABLED."
    assert arch_check.unreachable_code_message(bytes(range(256)) * 4096) is None


@NEEDS_NVCC
def test_the_kernel_library_path_hands_nvcc_the_arch_specific_target(tmp_path, monkeypatch):
    """compiler = "nvcc" (torch's load): TORCH_CUDA_ARCH_LIST "9.0a" reaches
    nvcc as sm_90a, and a library whose device code holds the printf fails."""
    from registry.builder import ccache, recipe, torch_extension

    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    cpp_extension = torch_extension._import_cpp_extension()
    if "CUDA_HOME" not in os.environ and Path("/usr/local/cuda/bin/nvcc").is_file():
        # As tests/test_nvcc_cubin_build.py: where nvcc on PATH is a wrapper
        # script (/usr/local/bin/nvcc), torch guesses /usr/local and links no CUDA runtime.
        monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/usr/local/cuda")
    kernel = copy_example(tmp_path / "kernels", "nvrtc")
    kernel.path("axpy_lib.cu").write_text(
        '#include <cstdio>\n#include "kreg/abi.h"\n' + _LIBRARY_KERNEL + _HOST_LAUNCHERS)
    kernel.edit("kernel.toml", 'compiler = "nvrtc"\nsources = ["axpy_launch.cpp"]\ndevice_sources = ["axpy_device.cu"]',
                'sources = ["axpy_lib.cu"]\narch_specific = true')
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    arch = environment.build_environment_for(manifest, "cuda", tmp_path / "cache")["env.cuda_arch"]
    assert arch == "9.0a"
    plan = recipe.lib_plan(manifest, "cuda", "cd" * 16, cuda_arch=arch)
    staging = tmp_path / "staging"
    staging.mkdir()
    with ccache.compiler_environment(tmp_path / "cache", arch):
        torch_extension.build(plan, staging)
    ninja = (staging / "build.ninja").read_text()
    assert "code=sm_90a" in ninja and "code=sm_90," not in ninja
    plain = recipe.lib_plan(manifest, "cuda", "ef" * 16, cuda_arch="9.0")
    (tmp_path / "plain").mkdir()
    with ccache.compiler_environment(tmp_path / "cache", "9.0"), pytest.raises(ArchTargetError):
        torch_extension.build(plain, tmp_path / "plain")


# One kernel for both of nvcc's passes (the host pass sees no feature macro),
# its body CUTLASS's way: the instructions where the feature is on, the printf where not.
_LIBRARY_KERNEL = r"""
extern "C" __global__ void feature_probe(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  out[0] = 1;
#else
  printf("ERROR : Arch conditional MMA instruction used without targeting appropriate compute capability. Aborting.\n");
  out[0] = 0;
#endif
}
"""

# axpy's launchers, each a do-nothing: the test builds the library, never calls it.
_HOST_LAUNCHERS = "".join(
    f"KREG_API const char* axpy_{s}(kreg_tensor, kreg_tensor, kreg_tensor, float, void*) {{ return nullptr; }}\n"
    for s in ("f32", "f16", "bf16"))


def test_cuobjdump_agrees_where_there_is_one(tmp_path, store, monkeypatch):
    """The note read above is what NVIDIA's tool reports as the cubin's arch."""
    import shutil

    candidates = [shutil.which("cuobjdump"), str(Path(environment.nvcc_command()).parent / "cuobjdump")]
    try:
        import triton  # its wheel bundles one

        candidates.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    except ImportError:
        pass
    tool = next((c for c in candidates if c and Path(c).is_file()), None)
    if tool is None:
        pytest.skip("no cuobjdump (the toolkit's or triton's)")
    kernel = feature_kernel(tmp_path, "nvrtc", arch_specific=True)
    _, built = cubin_for(kernel, store, monkeypatch)
    out = subprocess.run([tool, "-elf", built.path], capture_output=True, text=True).stdout
    assert "sm=90a" in out
