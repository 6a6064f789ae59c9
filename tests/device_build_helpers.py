"""What the device-code build tests share: the two build paths of a cubin
(kernels/axpy_nvrtc: NVRTC; kernels/axpy_cubin: `nvcc -cubin`, the same
kernel but for its manifest's compiler line) and one resolve of the cubin as
`get` does it, without a GPU."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import KernelCopy
from registry import _core, environment
from registry.device import cubin_build

ARCH = "9.0"
NVCC = environment.nvcc_command()
NEEDS_NVCC = pytest.mark.skipif(not Path(NVCC).is_file(), reason=f"no nvcc (looked for {NVCC}): "
                                "compiler = \"nvcc-cubin\" needs the CUDA toolkit")

# compiler -> the worked example of that build path
EXAMPLES = {"nvrtc": "axpy_nvrtc", "nvcc-cubin": "axpy_cubin"}
# Each path as a pytest parameter: nvcc-cubin skips, saying so, without nvcc.
PATHS = [pytest.param("nvrtc", id="nvrtc"), pytest.param("nvcc-cubin", id="nvcc-cubin", marks=NEEDS_NVCC)]


def copy_example(tmp_path, compiler: str) -> KernelCopy:
    name = EXAMPLES[compiler]
    return KernelCopy(tmp_path / "kernels", name, name)


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
