"""kernels/gemm_nvrtc built for Hopper on a machine without a GPU (NVRTC
after its precompiled prelude, the epilogue linked by nvJitLink): the store
path it ships (16-byte pieces of rows) and its fallback
(GEMM_EPILOGUE_ROWS=0) each compile with no compiler warning (ptxas's
serialized wgmma or spills among them) and hold both kernels. Their values
are checked on Hopper (tests/test_gpu_gemm_nvrtc.py); this stops a broken
build before a GPU is lent."""
from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from conftest import KernelCopy
from device_build_helpers import fresh_compile_servers, store  # noqa: F401 (fixtures)
from registry import _core
from registry.builder import elf
from registry.device import cubin_build, module_images

CUTLASS_INSTALLED = any(d.metadata["Name"] == "nvidia-cutlass" for d in importlib.metadata.distributions())
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CUTLASS_INSTALLED, reason="nvidia-cutlass is not installed "
                                 "(pip install nvidia-cutlass, or the project's cutlass extra)")]


@pytest.mark.parametrize("stores", ["rows", "pairs"])
def test_both_store_paths_build_for_hopper_without_a_warning(tmp_path, store, stores):
    copy = KernelCopy(tmp_path / "kernels", "gemm_nvrtc", f"gemm_nvrtc_{stores}")
    if stores == "pairs":
        for flags in ('device_cflags = ["-DNDEBUG"', 'cflags = ["-O2", "-DNDEBUG"'):  # device code and launcher
            copy.edit("kernel.toml", flags, flags + ', "-DGEMM_EPILOGUE_ROWS=0"')
    manifest = _core.parse_manifest(str(copy.path("kernel.toml")))
    artifact = cubin_build.ensure(store, manifest, "9.0a", None, trust_memo=False, force=False)
    assert artifact.built is not None
    assert artifact.built.warnings == []
    image = Path(artifact.path).read_bytes()
    kernels = [name for cubin in module_images.split(image) for name in elf.cubin_symbols(cubin)[0]]
    assert sorted(kernels) == ["gemm_nvrtc_bf16", "gemm_nvrtc_f16"]
