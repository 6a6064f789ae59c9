"""What a device compiler is to cubin_build.py (the driver that snapshots,
keys, mirrors, claims and publishes a cubin), and which one a manifest names.

Adding a compiler:
  1. a module in registry/device/ with a class meeting DeviceCompiler below
     and a `make(manifest)` that returns one;
  2. its manifest value in the core's list (kDeviceCompilers, core/manifest.h)
     and in COMPILERS below (tests/test_device_compilers.py checks that the two
     agree and that every compiler meets the protocol);
  3. tests: the build paths' tests take a compiler as a parameter
     (tests/device_build_helpers.py's PATHS).
Nothing else changes: keys, the mirror, the cache, the team cache, AOT
packages and isolated workers see a cubin, whichever compiler made it.
"""
from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

# The manifest's [cuda] compiler value -> the module whose make(manifest) returns the compiler.
COMPILERS = {
    "nvrtc": "registry.device.nvrtc_device",      # in-process NVRTC (+ nvrtc_pch.py with a prelude)
    "nvcc-cubin": "registry.device.nvcc_cubin",   # the toolkit's nvcc -cubin, a subprocess
}


@runtime_checkable
class DeviceCompiler(Protocol):
    """One device compiler, identified once per process."""

    name: str                      # as messages say it: "NVRTC", "nvcc -cubin"
    # Stands for what the compiler adds inside compile() beyond its options (a
    # prelude's stop marker, say): the driver hashes it with what it composes
    # itself, the unit and the include paths (cubin_build.keyed_recipe).
    recipe: str
    extra_scan_dirs: list[str]     # include dirs the scan adds for this compiler (NVRTC's <cstdint> shims)
    system_include_dir: str | None  # headers that come with the compiler (outside the key; its identity covers them)

    def identity(self) -> str:
        """What status() shows: the compiler and its version."""

    def key_inputs(self) -> list[tuple[str, str]]:
        """(name, value) pairs for the cubin's key: the compiler's identity."""

    def options(self, manifest, arch: str) -> list[str]:
        """The command line's options for `arch` (sm_90a, ...), hashed into the key as they are."""

    def compile(self, unit: bytes, unit_name: str, options: list[str]) -> tuple[bytes | None, str, list[str]]:
        """(the cubin, or None on a compile error; the compiler's output; the
        files it read, when it can tell: [] means exactly the mirror's)."""


def device_compiler(manifest) -> DeviceCompiler:
    """The compiler the manifest's [cuda] compiler names."""
    return importlib.import_module(COMPILERS[manifest.cuda.compiler]).make(manifest)
