"""Device code through `nvcc -cubin` ([cuda] compiler = "nvcc-cubin",
kernels/axpy_cubin), checked without a GPU: nvcc compiles to a cubin on any
machine with the CUDA toolkit. The key covers every project header nvcc read
(also one behind a macro include), nvcc's and its host compiler's identities,
the flags and the arch; errors point at file:line; a whole `get` builds the
cubin, the host launchers (directly, no nvcc) and the binding. Launching is
tests/test_gpu_nvrtc.py's part (its nvcc-cubin tests).

Skipped, saying so, where no nvcc is installed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKOUT, KernelCopy
from registry import _core, environment
from registry.device import cubin_build
from registry.errors import BuildError

NVCC = environment.nvcc_command()
pytestmark = pytest.mark.skipif(not Path(NVCC).is_file(), reason=f"no nvcc (looked for {NVCC}): "
                                "compiler = \"nvcc-cubin\" needs the CUDA toolkit")
ARCH = "9.0"


@pytest.fixture
def kernel(tmp_path) -> KernelCopy:
    return KernelCopy(tmp_path / "kernels", "axpy_cubin", "axpy_cubin")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))  # toolchains.toml goes there
    return _core.CacheStore(str(tmp_path / "cache"))


def build(kernel: KernelCopy, store, previous=None):
    """One resolve of the cubin, as `get` does it: previous is the last artifact."""
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    memo = None
    if previous is not None:
        memo = _core.Memo()
        memo.keys = {"device": previous.key}
    return cubin_build.ensure(store, manifest, ARCH, memo, trust_memo=False, force=False)


def inputs(artifact) -> dict[str, str]:
    return {i.name: i.value for i in artifact.entry.inputs}


def cubin(artifact) -> bytes:
    return Path(artifact.path).read_bytes()


def test_compiles_axpy_cubin_with_nvcc_and_keys_what_it_read(kernel, store):
    artifact = build(kernel, store)
    assert artifact.built is not None
    assert cubin(artifact)[:4] == b"\x7fELF"
    names = inputs(artifact)
    assert names["recipe"] == "nvcc-cubin-1"
    assert names["toolchain.nvcc"].startswith(os.path.realpath(NVCC)) or NVCC in names["toolchain.nvcc"]
    assert "release" in names["toolchain.nvcc"]  # nvcc's version line
    assert names["toolchain.nvcc_host"]  # the host compiler nvcc preprocesses with
    assert "toolchain.nvrtc" not in names
    flags = names["flags.device"]
    assert "-cubin" in flags and "-arch=sm_90" in flags and "-ccbin" in flags
    keyed = {n.removeprefix("file:") for n in names if n.startswith("file:")}
    assert {"axpy_device.cu", "axpy_math.h", "axpy_shape.h", "include/axpy_cubin/config.h",
            "registry/include/kreg/device.cuh"} <= keyed
    # nvcc has the real <cstdint>: NVRTC's shim is no input, nor is the host launcher.
    assert not [k for k in keyed if "kreg/nvrtc/" in k], keyed
    assert "axpy_launch.cpp" not in keyed
    assert artifact.compiler.identity() == "nvcc -cubin " + names["toolchain.nvcc"]


def test_an_unchanged_kernel_is_a_cache_hit(kernel, store):
    first = build(kernel, store)
    again = build(kernel, store, first)
    assert again.built is None and again.key == first.key


@pytest.mark.parametrize("header", ["include/axpy_cubin/config.h", "axpy_math.h"])
def test_header_edit_changes_key_and_cubin(kernel, store, header):
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
    previous = build(kernel, store)
    seen = {cubin(previous)}
    for bias in range(1, 4):
        kernel.path("include/axpy_cubin/config.h").write_text(
            f"#pragma once\n#define AXPY_BIAS {bias}.0f\n#define AXPY_VECTORS_PER_THREAD 4\n")
        artifact = build(kernel, store, previous)
        assert artifact.built is not None and cubin(artifact) not in seen, f"edit {bias} gave an old cubin"
        seen.add(cubin(artifact))
        previous = artifact
    # Going back to earlier content finds its cubin: no compile.
    kernel.path("include/axpy_cubin/config.h").write_text(
        "#pragma once\n#define AXPY_BIAS 2.0f\n#define AXPY_VECTORS_PER_THREAD 4\n")
    assert build(kernel, store, previous).built is None


def test_flags_and_arch_are_keyed(kernel, store):
    first = build(kernel, store)
    kernel.edit("kernel.toml", 'cflags = ["-O3"]\n\n[[op]]', 'cflags = ["-O3"]\ndevice_cflags = ["-lineinfo"]\n\n[[op]]')
    flagged = build(kernel, store, first)
    assert flagged.key != first.key and "-lineinfo" in inputs(flagged)["flags.device"]
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    other_arch = cubin_build.ensure(store, manifest, "8.0", None, trust_memo=False, force=False)
    assert other_arch.key != flagged.key and "-arch=sm_80" in inputs(other_arch)["flags.device"]


def test_header_behind_a_macro_include_is_keyed(kernel, store):
    """The scanner cannot read `#include MACRO`; nvcc (its host preprocessor)
    cannot open what was not snapshotted, so compiling finds it, and the
    published key covers it."""
    kernel.path("macro").mkdir()
    kernel.path("macro/extra.h").write_text("#define EXTRA_VALUE 1.0f\n")
    kernel.path("with_macro.cu").write_text(
        '#include "axpy_device.cu"\n#define KREG_TEST_HEADER "macro/extra.h"\n#include KREG_TEST_HEADER\n'
        'extern "C" __global__ void extra(float* out) { out[0] = EXTRA_VALUE; }\n')
    kernel.edit("kernel.toml", 'device_sources = ["axpy_device.cu"]', 'device_sources = ["with_macro.cu"]')
    kernel.edit("kernel.toml", 'include_dirs = ["include"]', 'include_dirs = ["include", "."]')
    first = build(kernel, store)
    assert first.built.rounds == 2  # the first compile asked for macro/extra.h
    assert "file:macro/extra.h" in inputs(first)
    kernel.path("macro/extra.h").write_text("#define EXTRA_VALUE 2.0f\n")
    second = build(kernel, store, first)
    assert second.built is not None and second.built.rounds == 1  # recorded: no discovery needed
    assert set(_core.diff_key_inputs(first.entry.inputs, second.entry.inputs)) == {"file:macro/extra.h changed"}


def test_a_header_read_around_the_mirror_is_keyed(kernel, store):
    """An absolute #include spelled through a macro: the scanner cannot see it,
    and nvcc opens the real file (no "cannot open" to learn from), not the
    snapshot. nvcc's dependency output names it, and the key covers it."""
    kernel.path("abs.h").write_text("#define ABS_VALUE 1.0f\n")
    kernel.path("abs.cu").write_text(
        f'#include "axpy_device.cu"\n#define ABS_HEADER "{kernel.path("abs.h")}"\n#include ABS_HEADER\n'
        'extern "C" __global__ void absolute(float* out) { out[0] = ABS_VALUE; }\n')
    kernel.edit("kernel.toml", 'device_sources = ["axpy_device.cu"]', 'device_sources = ["abs.cu"]')
    first = build(kernel, store)
    assert "file:abs.h" in inputs(first)
    kernel.path("abs.h").write_text("#define ABS_VALUE 2.0f\n")
    second = build(kernel, store, first)  # recorded in the entry's deps: found by the next lookup
    assert second.built is not None and second.key != first.key


def test_compile_error_points_at_the_real_file_and_line(kernel, store):
    kernel.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return alpha * x + y + AXPY_BIAS + oops;")
    with pytest.raises(BuildError) as caught:
        build(kernel, store)
    first = caught.value.first
    assert first is not None, caught.value.log
    assert first.file == str(kernel.path("axpy_math.h").resolve())
    assert first.line == 13
    assert "nvcc -cubin" in str(caught.value)
    assert "/src/k/" not in str(caught.value)  # no staging mirror paths in what the user reads


def test_missing_header_is_a_compile_error_naming_it(kernel, store):
    kernel.edit("axpy_device.cu", '#include "axpy_math.h"', '#include "axpy_mth.h"')
    with pytest.raises(BuildError) as caught:
        build(kernel, store)
    assert "axpy_mth.h" in str(caught.value)


GET_SCRIPT = r"""
import json, sys, time
popen = []
sys.addaudithook(lambda event, args: popen.append([str(a) for a in (args[1] or [])])
                 if event == "subprocess.Popen" else None)
import registry
from registry.device import driver_module
bound = []
driver_module.bind = lambda library, key, path: bound.append((key, path))  # no GPU: no driver
from registry.build import direct
from registry.device import cubin_build
spans = {}  # when the cubin and the host launcher library were built
def timed(module, name, label):
    fn = getattr(module, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spans[label] = (start, time.perf_counter())
    setattr(module, name, wrapper)
timed(cubin_build, "compile_device", "device")
timed(direct, "build", "lib")
registry.get(sys.argv[1], device="cuda")
status = registry.status(sys.argv[1], device="cuda")
print(json.dumps({"compiled": status.compiled, "device": status.device, "key": status.key,
                  "bound": bound, "popen": popen, "spans": spans}))
"""


def test_a_get_builds_cubin_launchers_and_binding(tmp_path):
    """The whole CUDA `get` of an nvcc-cubin kernel without a GPU (the cubin is
    bound to a stand-in): nvcc runs once, with -cubin; the host launchers are
    built directly (no nvcc), at the same time as the cubin; the launcher
    library's key names the device compiler."""
    KernelCopy(tmp_path / "kernels", "axpy_cubin", "axpy_cubin")
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "TORCH_CUDA_ARCH_LIST": "9.0",
           "REGISTRY_KERNELS_PATH": str(tmp_path / "kernels"), "REGISTRY_CACHE_DIR": str(tmp_path / "cache"),
           "CCACHE_DIR": str(tmp_path / "ccache")}
    if "CUDA_HOME" not in env and Path("/usr/local/cuda/bin/nvcc").is_file():
        # The binding links the CUDA runtime from CUDA_HOME: where nvcc on PATH is a
        # wrapper script (/usr/local/bin/nvcc), torch would guess /usr/local.
        env["CUDA_HOME"] = "/usr/local/cuda"
    done = subprocess.run([sys.executable, "-c", GET_SCRIPT, "axpy_cubin"], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(result["compiled"]) == ["axpy", "device", "lib"], result
    (device_start, device_end), (lib_start, lib_end) = result["spans"]["device"], result["spans"]["lib"]
    assert device_start < lib_end and lib_start < device_end, "the cubin and the host side compile side by side"
    assert len(result["bound"]) == 1 and Path(result["bound"][0][1]).read_bytes()[:4] == b"\x7fELF"
    nvcc_runs = [argv for argv in result["popen"] if argv and Path(argv[0]).name == "nvcc"
                 and "--version" not in argv]
    assert len(nvcc_runs) == 1 and "-cubin" in nvcc_runs[0], nvcc_runs
    assert result["device"].startswith("nvcc -cubin "), result["device"]
    store = _core.CacheStore(str(tmp_path / "cache"))
    lib_inputs = {i.name: i.value for i in store.lookup(result["key"]).entry.inputs}
    assert lib_inputs["device_compiler"] == "nvcc-cubin"
    assert "toolchain.nvcc" not in lib_inputs  # host launchers only: nvcc is the cubin's input
