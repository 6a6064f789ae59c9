"""kernels/gemm_nvrtc built for Hopper on a machine without a GPU (NVRTC
after its precompiled prelude, the epilogue linked by nvJitLink): the store
path it ships (16-byte pieces of rows) and its fallback
(GEMM_EPILOGUE_ROWS=0) each compile with no compiler warning (ptxas's
serialized wgmma or spills among them) and hold both kernels. Their values
are checked on Hopper (tests/test_gpu_gemm_nvrtc.py); this stops a broken
build before a GPU is lent."""
from __future__ import annotations

from pathlib import Path

import pytest

from device_build_helpers import NEEDS_CUTLASS, fresh_compile_servers, gemm_nvrtc_copy, store  # noqa: F401
from registry import _core
from registry.builder import elf
from registry.device import cubin_build, module_images

pytestmark = [pytest.mark.slow, NEEDS_CUTLASS]


@pytest.mark.parametrize("stores", ["rows", "pairs"])
def test_both_store_paths_build_for_hopper_without_a_warning(tmp_path, store, stores):
    defines = ["GEMM_EPILOGUE_ROWS=0"] if stores == "pairs" else []  # rows: as shipped
    copy = gemm_nvrtc_copy(tmp_path / "kernels", f"gemm_nvrtc_{stores}", *defines)
    manifest = _core.parse_manifest(str(copy.path("kernel.toml")))
    artifact = cubin_build.ensure(store, manifest, "9.0a", None, trust_memo=False, force=False)
    assert artifact.built is not None
    assert artifact.built.warnings == []
    image = Path(artifact.path).read_bytes()
    kernels = [name for cubin in module_images.split(image) for name in elf.cubin_symbols(cubin)[0]]
    assert sorted(kernels) == ["gemm_nvrtc_bf16", "gemm_nvrtc_f16"]
