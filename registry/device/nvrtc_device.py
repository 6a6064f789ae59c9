"""NVRTC as a device compiler (device/compiler.py's protocol): in-process
(registry/device/nvrtc.py, the library), with the registry's <cstdint> shims,
keyed by the wheel's identity. With a [cuda] prelude, the same behind the
compile server that keeps the prelude's precompiled header (nvrtc_pch.py);
with link_sources, either one compiling to LTO-IR, linked by nvJitLink (lto_link.py).
"""
from __future__ import annotations

from pathlib import Path

from registry.builder import keys

# What NVRTC is handed beyond the options and the driver's unit and include
# paths (which cubin_build.keyed_recipe hashes): nothing; the unit is compiled
# in memory as it is.
RECIPE = ""
SHIM_DIR = keys.REGISTRY_INCLUDE / "kreg" / "nvrtc"  # <cstdint>, <stdint.h>

# NVVM optimizes and ptxas assembles in this many threads. axpy_nvrtc's six
# kernels, new source each time (bench/nvrtc_edit_loop.py's floors): 0.263 ->
# 0.215 s on the H200's 16 cores, 0.233 -> 0.201 s on 2. A fixed count, not 0
# ("all cores"): the cubin's bytes depend on it, and they must depend only on
# the key.
SPLIT_COMPILE_THREADS = 8


class NvrtcDevice:
    """NVRTC (registry/device/nvrtc.py) as the device compiler."""

    name = "NVRTC"
    recipe = RECIPE
    extra_scan_dirs = [str(SHIM_DIR)]

    def __init__(self, nv):
        self.nvrtc = nv
        self.system_include_dir = nv.include_dir  # the wheel's CUDA headers

    def identity(self) -> str:
        return self.nvrtc.identity()

    def key_inputs(self) -> list[tuple[str, str]]:
        return [("toolchain.nvrtc", self.nvrtc.identity()), ("nvrtc.include_dir", self.nvrtc.include_dir or "")]

    def options(self, manifest, arch: str) -> list[str]:
        return nvrtc_options(manifest, arch, split=self.nvrtc.splits_compiles)

    def compile(self, unit: bytes, unit_name: str, options: list[str],
                ltoir: bool = False) -> tuple[bytes | None, str, list[str]]:
        """ltoir: the unit's LTO-IR instead of a cubin (device/lto_link.py)."""
        cubin, log = self.nvrtc.compile(unit, unit_name, options, ltoir)
        return cubin, log, []  # what NVRTC opened is what the mirror held


def nvrtc_options(manifest, arch: str, split: bool = True) -> list[str]:
    threads = [f"--split-compile={SPLIT_COMPILE_THREADS}"] if split else []
    return [f"-arch={arch}", "-std=c++17", "-default-device", *threads, *manifest.cuda.device_cflags]


def make(manifest):
    """NVRTC from torch's wheel; with a [cuda] prelude, through its compile server."""
    from registry.device import nvrtc as nvrtc_lib

    plain = NvrtcDevice(nvrtc_lib.load())
    compiler = plain
    if manifest.cuda.prelude or manifest.cuda.link_sources:
        from registry.device.mirror import device_sources, mirror_path

        if manifest.cuda.prelude:
            from registry.device.nvrtc_pch import NvrtcPchDevice

            compiler = NvrtcPchDevice(plain, manifest, device_sources(manifest), mirror_path)
        if manifest.cuda.link_sources:
            from registry.device.lto_link import LinkedDevice

            link_sources = [str(Path(manifest.dir) / s) for s in manifest.cuda.link_sources]
            compiler = LinkedDevice(compiler, plain, manifest, link_sources, mirror_path)
    return compiler
