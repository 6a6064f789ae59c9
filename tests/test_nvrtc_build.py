"""Device code through NVRTC, checked without a GPU: NVRTC compiles to a cubin
on any machine. Every project header NVRTC can see is keyed by content (also
those behind macro and conditional includes), header edits change the key
and the cubin, errors point at file:line, and no CUDA toolkit is needed.
What both device paths share (also what the cubin's key names) is
tests/test_device_build_paths.py's; launching the cubin is
tests/test_gpu_device_paths.py's part."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKOUT
from device_build_helpers import build, copy_example, cubin, inputs, store  # noqa: F401 (store: a fixture)
from registry import _core
from registry.device import cubin_build, nvrtc, nvrtc_device


@pytest.fixture
def kernel(tmp_path):
    return copy_example(tmp_path / "kernels", "nvrtc")


def test_nvrtc_comes_from_torchs_wheel():
    nv = nvrtc.load()
    assert "site-packages/nvidia" in nv.library, nv.library
    assert nv.version.split(".")[0] in ("12", "13")
    assert nv.library in nv.identity() and "nvidia-cuda-nvrtc" in nv.identity()
    assert nv.include_dir and Path(nv.include_dir, "cuda_fp16.h").is_file()


def test_a_cubin_build_leaves_the_cache_cap_to_after_the_result(kernel, store, monkeypatch, tmp_path):
    # The cap runs on a worker thread once the get has its result (resolve.py);
    # an entry over the cap is still there when the cubin build returns.
    staging = tmp_path / "old-staging"
    staging.mkdir()
    (staging / "old.so").write_bytes(b"old bytes")
    entry = _core.Entry()
    entry.key, entry.kernel, entry.backend, entry.kind, entry.artifact = "cd" * 16, "old", "cpu", "kernel-lib", "old.so"
    store.publish(str(staging), entry)
    monkeypatch.setenv("REGISTRY_CACHE_MAX_BYTES", "1")
    assert build(kernel, store).built is not None
    assert store.lookup("cd" * 16).entry is not None


def test_never_turns_on_nvrtc_automatic_pch(kernel):
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    options = nvrtc_device.nvrtc_options(manifest, "sm_90")
    assert not [o for o in options if "pch" in o], options


def test_both_sides_of_a_conditional_include_are_keyed(kernel, store):
    kernel.path("on.h").write_text("#define PICKED 1.0f\n")
    kernel.path("off.h").write_text("#define PICKED 2.0f\n")
    kernel.path("cond.cu").write_text(
        '#include "axpy_device.cu"\n#if AXPY_VECTORS_PER_THREAD == 4\n#include "on.h"\n#else\n#include "off.h"\n'
        '#endif\nextern "C" __global__ void picked(float* out) { out[0] = PICKED; }\n')
    kernel.edit("kernel.toml", 'device_sources = ["axpy_device.cu"]', 'device_sources = ["cond.cu"]')
    first = build(kernel, store)
    assert {"file:on.h", "file:off.h"} <= set(inputs(first))
    kernel.path("on.h").write_text("#define PICKED 3.0f\n")
    taken = build(kernel, store, first)
    assert taken.key != first.key and cubin(taken) != cubin(first)
    # Flipping the condition (an edit of config.h) picks off.h: a new key and cubin.
    kernel.edit("include/axpy_nvrtc/config.h", "AXPY_VECTORS_PER_THREAD 4", "AXPY_VECTORS_PER_THREAD 2")
    flipped = build(kernel, store, taken)
    assert flipped.key != taken.key and cubin(flipped) != cubin(taken)


def test_keys_are_exact_even_when_the_scanner_sees_nothing(kernel, store, monkeypatch):
    """NVRTC is given only the snapshot: with a scanner that finds no header at
    all, compiling still discovers each one and the key covers them all."""
    monkeypatch.setattr(cubin_build, "scan_files",
                        lambda manifest, recorded, compiler: cubin_build.device_sources(manifest) + list(recorded))
    artifact = build(kernel, store)
    assert artifact.built.rounds > 1
    keyed = {n for n in inputs(artifact) if n.startswith("file:")}
    assert {"file:axpy_math.h", "file:axpy_shape.h", "file:include/axpy_nvrtc/config.h",
            "file:registry/include/kreg/device.cuh"} <= keyed


def test_target_arch_from_the_arch_list():
    assert cubin_build.target_arch("9.0") == "sm_90"
    assert cubin_build.target_arch("8.0;9.0+PTX") == "sm_90"
    assert cubin_build.target_arch("8.6 8.9") == "sm_89"
    with pytest.raises(Exception, match="TORCH_CUDA_ARCH_LIST"):
        cubin_build.target_arch("")


def test_builds_with_no_cuda_toolkit(kernel, tmp_path):
    """nvcc hidden (no /usr/local/cuda on PATH, CUDA_HOME unset): the device
    code still compiles and is keyed, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "cuda" not in p)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), str(CHECKOUT / "tests")])
    script = f"""
import shutil
from registry import _core
from registry.device import cubin_build
assert shutil.which("nvcc") is None, shutil.which("nvcc")
manifest = _core.parse_manifest({str(kernel.path("kernel.toml"))!r})
store = _core.CacheStore({str(tmp_path / "cache")!r})
a = cubin_build.ensure(store, manifest, "9.0", None, trust_memo=False, force=False)
assert open(a.path, "rb").read(4) == b"\\x7fELF"
print("KEY", a.key)
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "KEY " in done.stdout


@pytest.mark.parametrize("library, distribution, splits", [
    ("/w/nvidia/cu13/lib/libnvrtc.so.13", "nvidia-cuda-nvrtc 13.0.88", True),
    ("/w/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12 12.8.93", True),
    ("/w/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12 12.1.105", False),
    ("/opt/cuda/lib64/libnvrtc.so.13", "", True),   # REGISTRY_NVRTC: no wheel, the soname tells
    ("/opt/cuda/lib64/libnvrtc.so.12", "", False),  # which 12.x is unknown: not asked
    ("/opt/cuda/lib64/libnvrtc.so", "", False),
])
def test_split_compile_only_where_nvrtc_takes_it(kernel, library, distribution, splits):
    from registry.device.nvrtc import Nvrtc

    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    compiler = nvrtc_device.NvrtcDevice(Nvrtc(library, None, distribution))
    options = compiler.options(manifest, "sm_90")
    assert (f"--split-compile={nvrtc_device.SPLIT_COMPILE_THREADS}" in options) is splits, options
