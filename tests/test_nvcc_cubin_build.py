"""Device code through `nvcc -cubin` ([cuda] compiler = "nvcc-cubin"; a copy
of kernels/axpy_nvrtc with that compiler line), checked without a GPU: nvcc
compiles to a cubin on any machine with the CUDA toolkit. The key covers every
project header nvcc read (also one behind a macro or absolute include), nvcc's
and its host compiler's identities, the flags and the arch; a whole `get`
builds the cubin, the host launchers (directly, no nvcc) and the binding.
What both device paths share (also what the cubin's key names) is
tests/test_device_build_paths.py's; launching is tests/test_gpu_device_paths.py's.

Skipped, saying so, where no nvcc is installed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKOUT
from device_build_helpers import NEEDS_NVCC, build, copy_example, inputs, store  # noqa: F401 (store: a fixture)
from registry import _core
from registry.device import cubin_build
from registry.errors import BuildError

pytestmark = NEEDS_NVCC


@pytest.fixture
def kernel(tmp_path):
    return copy_example(tmp_path / "kernels", "nvcc-cubin")


def test_flags_and_arch_are_keyed(kernel, store):
    first = build(kernel, store)
    kernel.edit("kernel.toml", 'cflags = ["-O3"]\n\n[[op]]', 'cflags = ["-O3"]\ndevice_cflags = ["-lineinfo"]\n\n[[op]]')
    flagged = build(kernel, store, first)
    assert flagged.key != first.key and "-lineinfo" in inputs(flagged)["flags.device"]
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    other_arch = cubin_build.ensure(store, manifest, "8.0", None, trust_memo=False, force=False)
    assert other_arch.key != flagged.key and "-arch=sm_80" in inputs(other_arch)["flags.device"]


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


def test_a_compile_error_names_the_device_compiler(kernel, store):
    # Where it points (file:line) is tests/test_device_build_paths.py's check, for both paths.
    kernel.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return alpha * x + y + AXPY_BIAS + oops;")
    with pytest.raises(BuildError) as caught:
        build(kernel, store)
    assert "nvcc -cubin" in str(caught.value)


GET_SCRIPT = r"""
import json, sys, time
popen = []
sys.addaudithook(lambda event, args: popen.append([str(a) for a in (args[1] or [])])
                 if event == "subprocess.Popen" else None)
import registry
from registry.device import driver_module
bound = []
driver_module.bind = lambda library, key, path: bound.append((key, path))  # a stand-in for the driver
from registry.builder import direct
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
                  "cubin": status.artifacts["device code (cubin)"],
                  "bound": bound, "popen": popen, "spans": spans}))
"""


def test_a_get_builds_cubin_launchers_and_binding(tmp_path):
    """The whole CUDA `get` of an nvcc-cubin kernel without a GPU (a GPU's bind
    replaced by a stand-in): nvcc runs once, with -cubin; the host launchers are
    built directly (no nvcc), at the same time as the cubin; the launcher
    library's key names the device compiler."""
    kernel = copy_example(tmp_path / "kernels", "nvcc-cubin")
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "TORCH_CUDA_ARCH_LIST": "9.0",
           "REGISTRY_KERNELS_PATH": str(tmp_path / "kernels"), "REGISTRY_CACHE_DIR": str(tmp_path / "cache"),
           "CCACHE_DIR": str(tmp_path / "ccache")}
    if "CUDA_HOME" not in env and Path("/usr/local/cuda/bin/nvcc").is_file():
        # The binding links the CUDA runtime from CUDA_HOME: where nvcc on PATH is a
        # wrapper script (/usr/local/bin/nvcc), torch would guess /usr/local.
        env["CUDA_HOME"] = "/usr/local/cuda"
    done = subprocess.run([sys.executable, "-c", GET_SCRIPT, kernel.name], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(result["compiled"]) == ["binding", "device", "lib"], result
    (device_start, device_end), (lib_start, lib_end) = result["spans"]["device"], result["spans"]["lib"]
    assert device_start < lib_end and lib_start < device_end, "the cubin and the host side compile side by side"
    # Bound only where a GPU is visible (the stand-in records it); without one
    # the get builds and caches the cubin, which nothing here could call.
    import torch

    assert len(result["bound"]) == (1 if torch.cuda.is_available() else 0), result["bound"]
    assert Path(result["cubin"]).read_bytes()[:4] == b"\x7fELF"
    nvcc_runs = [argv for argv in result["popen"] if argv and Path(argv[0]).name == "nvcc"
                 and "--version" not in argv]
    assert len(nvcc_runs) == 1 and "-cubin" in nvcc_runs[0], nvcc_runs
    assert result["device"].startswith("nvcc -cubin "), result["device"]
    store = _core.CacheStore(str(tmp_path / "cache"))
    lib_inputs = {i.name: i.value for i in store.lookup(result["key"]).entry.inputs}
    assert lib_inputs["device_compiler"] == "nvcc-cubin"
    assert "toolchain.nvcc" not in lib_inputs  # host launchers only: nvcc is the cubin's input
