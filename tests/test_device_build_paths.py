"""The device-code build, checked on both of its paths (NVRTC and
`nvcc -cubin`, each a copy of kernels/axpy_nvrtc with its compiler line set)
without a GPU: the cubin's key names what the compiler read and the
compiler; an unchanged kernel is a hit; every header edit changes the key and
the cubin, and going back finds the earlier cubin; a header behind a macro
include is keyed; errors point at the real file:line. What only one path
does is in tests/test_nvrtc_build.py and tests/test_nvcc_cubin_build.py."""
from __future__ import annotations

import os

import pytest

from device_build_helpers import NVCC, PATHS, build, copy_example, cubin, inputs, store  # noqa: F401 (store: a fixture)
from registry import _core
from registry.device import nvrtc
from registry.errors import BuildError


@pytest.fixture(params=PATHS)
def kernel(request, tmp_path):
    return copy_example(tmp_path / "kernels", request.param)


def test_compiles_axpy_to_a_cubin_and_keys_what_it_read(kernel, store):
    artifact = build(kernel, store)
    assert artifact.built is not None
    assert cubin(artifact)[:4] == b"\x7fELF"
    names = inputs(artifact)
    assert "-arch=sm_90" in names["flags.device"]
    keyed = {n.removeprefix("file:") for n in names if n.startswith("file:")}
    # The device source, its headers and the registry's device header:
    assert {"axpy_device.cu", "axpy_math.h", "axpy_shape.h", kernel.config,
            "registry/include/kreg/device.cuh"} <= keyed
    # The host launcher is not device code.
    assert "axpy_launch.cpp" not in keyed
    if kernel.compiler == "nvrtc":
        assert names["toolchain.nvrtc"] == nvrtc.load().identity()
        assert "registry/include/kreg/nvrtc/cstdint" in keyed  # NVRTC's <cstdint> shim
        return
    # The command's shape and what the driver hands it, with the staging folder as a placeholder.
    assert names["recipe"].startswith("<nvcc> <options> -Xcompiler=-MD"), names["recipe"]
    assert '#include "<staging>/src/k/axpy_device.cu"' in names["recipe"] and "-I<staging>/src/r" in names["recipe"]
    assert names["toolchain.nvcc"].startswith(os.path.realpath(NVCC)) or NVCC in names["toolchain.nvcc"]
    assert "release" in names["toolchain.nvcc"]  # nvcc's version line
    assert names["toolchain.nvcc_host"]  # the host compiler nvcc preprocesses with
    assert "toolchain.nvrtc" not in names
    flags = names["flags.device"]
    assert "-cubin" in flags and "-arch=sm_90" in flags and "-ccbin" in flags
    # nvcc has the real <cstdint>: NVRTC's shim is no input.
    assert not [k for k in keyed if "kreg/nvrtc/" in k], keyed
    assert artifact.compiler.identity() == "nvcc -cubin " + names["toolchain.nvcc"]


def test_an_unchanged_kernel_is_a_cache_hit(kernel, store):
    first = build(kernel, store)
    again = build(kernel, store, first)
    assert again.built is None and again.key == first.key


@pytest.mark.parametrize("header", ["config", "axpy_math.h"])
def test_header_edit_changes_key_and_cubin(kernel, store, header):
    header = kernel.config if header == "config" else header
    first = build(kernel, store)
    if header.endswith("config.h"):
        kernel.edit(header, "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f")
    else:
        kernel.edit(header, "return alpha * x + y", "return alpha * x - y")
    second = build(kernel, store, first)
    assert second.built is not None, "a header edit must recompile"
    assert second.key != first.key and cubin(second) != cubin(first)
    assert set(_core.diff_key_inputs(first.entry.inputs, second.entry.inputs)) == {f"file:{header} changed"}


def test_every_edit_of_a_header_gives_a_new_cubin(kernel, store):
    """Edits in a row, as in a notebook: never an old cubin (NVRTC's automatic
    PCH folder returned the old value after each of these); going back to
    earlier content finds its cubin without a compile."""
    previous = build(kernel, store)
    seen = {cubin(previous)}
    for bias in range(1, 5):
        kernel.path(kernel.config).write_text(
            f"#pragma once\n#define AXPY_BIAS {bias}.0f\n#define AXPY_VECTORS_PER_THREAD 4\n")
        artifact = build(kernel, store, previous)
        assert artifact.built is not None and cubin(artifact) not in seen, f"edit {bias} gave an old cubin"
        seen.add(cubin(artifact))
        previous = artifact
    kernel.path(kernel.config).write_text("#pragma once\n#define AXPY_BIAS 2.0f\n#define AXPY_VECTORS_PER_THREAD 4\n")
    assert build(kernel, store, previous).built is None


MACRO_SOURCE = ('#include "axpy_device.cu"\n#define KREG_TEST_HEADER "macro/extra.h"\n#include KREG_TEST_HEADER\n'
                'extern "C" __global__ void extra(float* out) { out[0] = EXTRA_VALUE; }\n')


def test_header_behind_a_macro_include_is_keyed(kernel, store):
    """The scanner cannot read `#include MACRO`; the device compiler cannot
    open what was not snapshotted, so compiling finds it, and the published
    key covers it."""
    kernel.path("macro").mkdir()
    kernel.path("macro/extra.h").write_text("#define EXTRA_VALUE 1.0f\n")
    kernel.path("with_macro.cu").write_text(MACRO_SOURCE)
    kernel.edit("kernel.toml", 'device_sources = ["axpy_device.cu"]', 'device_sources = ["with_macro.cu"]')
    kernel.edit("kernel.toml", 'include_dirs = ["include"]', 'include_dirs = ["include", "."]')
    first = build(kernel, store)
    assert first.built.rounds == 2  # the first compile asked for macro/extra.h
    assert "file:macro/extra.h" in inputs(first)  # the published key covers it
    # Without a previous build to learn from, the same bytes give the same key: a hit.
    assert build(kernel, store).key == first.key
    kernel.path("macro/extra.h").write_text("#define EXTRA_VALUE 2.0f\n")
    second = build(kernel, store, first)
    assert second.built is not None and second.built.rounds == 1  # recorded: no discovery needed
    assert second.key != first.key and cubin(second) != cubin(first)
    assert set(_core.diff_key_inputs(first.entry.inputs, second.entry.inputs)) == {"file:macro/extra.h changed"}


def test_compile_error_points_at_the_real_file_and_line(kernel, store):
    kernel.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return alpha * x + y + AXPY_BIAS + oops;")
    with pytest.raises(BuildError) as caught:
        build(kernel, store)
    first = caught.value.first
    assert first is not None, caught.value.log
    assert first.file == str(kernel.path("axpy_math.h").resolve())
    assert first.line == 13
    from registry.notebook.render import render_text

    text = render_text(caught.value)
    assert "axpy_math.h:13" in text and "oops" in text
    assert "/src/k/" not in str(caught.value)  # no staging mirror paths in what the user reads


def test_missing_header_is_a_compile_error_naming_it(kernel, store):
    kernel.edit("axpy_device.cu", '#include "axpy_math.h"', '#include "axpy_mth.h"')
    with pytest.raises(BuildError) as caught:
        build(kernel, store)
    assert "axpy_mth.h" in str(caught.value)
    assert caught.value.first.file == str(kernel.path("axpy_device.cu").resolve())


def test_a_cubin_built_by_another_process_while_waiting_is_used(kernel, store, tmp_path, monkeypatch):
    """The lock's second look, as for every artifact: the cubin another
    process published while this one waited for the key's lock is used, not
    compiled again."""
    import shutil

    built_elsewhere = build(kernel, store)  # what the other process publishes
    mine = _core.CacheStore(str(tmp_path / "mine"))
    real_try_claim = _core.try_claim

    def published_while_waiting(claimed_store, artifact):
        if not mine.lookup(built_elsewhere.key).entry:
            staging = mine.make_staging_dir()
            shutil.copy(built_elsewhere.path, staging)
            mine.publish(staging, built_elsewhere.entry)
        return real_try_claim(claimed_store, artifact)

    monkeypatch.setattr(_core, "try_claim", published_while_waiting)
    found = build(kernel, mine)
    assert found.built is None, "compiled again what another process had just published"
    assert found.key == built_elsewhere.key


def test_the_cli_builds_for_a_gpu_elsewhere_on_a_machine_without_one(kernel, tmp_path):
    """`python -m registry build NAME --device cuda` with TORCH_CUDA_ARCH_LIST
    builds and caches the cubin and its launchers where no GPU is visible:
    there is no context to bind the cubin into, and nothing to call there."""
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without a visible GPU")
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST="9.0", REGISTRY_KERNELS_PATH=str(kernel.dir.parent),
               REGISTRY_CACHE_DIR=str(tmp_path / "cli-cache"))
    done = subprocess.run([sys.executable, "-m", "registry", "build", kernel.name, "--device", "cuda"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "device code (cubin):" in done.stdout and "compiled lib" in done.stdout, done.stdout
