"""What the device-code build tests share: the two build paths of a cubin
(NVRTC and `nvcc -cubin`), both taken by copies of one worked example,
kernels/axpy_nvrtc, whose manifest's compiler line is all that differs, and
one resolve of the cubin as `get` does it, without a GPU."""
from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from conftest import KernelCopy
from registry import _core, environment
from registry.device import cubin_build

ARCH = "9.0"
NVCC = environment.nvcc_command()
NEEDS_NVCC = pytest.mark.skipif(not Path(NVCC).is_file(), reason=f"no nvcc (looked for {NVCC}): "
                                "compiler = \"nvcc-cubin\" needs the CUDA toolkit")

CUTLASS_INSTALLED = any(d.metadata["Name"] == "nvidia-cutlass" for d in importlib.metadata.distributions())
NEEDS_CUTLASS = pytest.mark.skipif(not CUTLASS_INSTALLED, reason="nvidia-cutlass is not installed "
                                   "(pip install nvidia-cutlass, or the project's cutlass extra)")

# The worked example of both cubin paths: the same sources serve NVRTC and
# nvcc -cubin (kreg/device.cuh, kreg/launch.h), so one folder is kept and the
# other path is its copy with the [cuda] compiler line switched.
EXAMPLE = "axpy_nvrtc"
CONFIG = f"include/{EXAMPLE}/config.h"  # the header tests edit (AXPY_BIAS)
# Each path as a pytest parameter: nvcc-cubin skips, saying so, without nvcc.
PATHS = [pytest.param("nvrtc", id="nvrtc"), pytest.param("nvcc-cubin", id="nvcc-cubin", marks=NEEDS_NVCC)]


def copy_example(root: Path, compiler: str, suffix: str = "") -> KernelCopy:
    """kernels/axpy_nvrtc copied to root/axpy_<compiler><suffix>, its device
    code compiled by `compiler` ("nvrtc" or "nvcc-cubin")."""
    copy = KernelCopy(root, EXAMPLE, "axpy_" + compiler.replace("-", "_") + suffix)
    if compiler != "nvrtc":
        copy.edit("kernel.toml", 'compiler = "nvrtc"', f'compiler = "{compiler}"')
    copy.compiler, copy.config = compiler, CONFIG
    return copy


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A private cache for one test's builds (imported by the test modules that use it)."""
    return make_store(tmp_path, monkeypatch)


def make_store(tmp_path, monkeypatch):
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


@pytest.fixture(autouse=True)
def fresh_compile_servers():
    """Each test starts without a prelude compile server (nvrtc_pch.py) and
    leaves none running; autouse where a test module imports it."""
    from registry.device import nvrtc_pch

    nvrtc_pch._servers.clear()
    yield
    for server in nvrtc_pch._servers.values():
        server.stop()
    nvrtc_pch._servers.clear()


def gemm_nvrtc_copy(root: Path, name: str, *defines: str) -> KernelCopy:
    """kernels/gemm_nvrtc copied to root/name, its device code and launcher
    both built with `defines` (e.g. "GEMM_EPILOGUE_ROWS=0"): the two must
    agree on the kernel's types."""
    copy = KernelCopy(root, "gemm_nvrtc", name)
    extra = "".join(f', "-D{d}"' for d in defines)
    for flags in ('device_cflags = ["-DNDEBUG"', 'cflags = ["-O2", "-DNDEBUG"'):
        copy.edit("kernel.toml", flags, flags + extra)
    return copy
