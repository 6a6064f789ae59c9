"""Checked builds: the kernel built again with sanitizer flags, run only in
a worker (the parent never loads it: an ASan-instrumented library needs ASan's
runtime first in the process).

The checked build is the kernel's manifest derived in memory with the flags
below (_core.with_extra_flags, variant "checked"), built through the normal
resolve (plan, team cache, claim, build, publish, pin) without loading it:
its key covers the flags, so it is cached apart, and it compiles the sources
where the user edits them, so a diagnostic names the user's file. The binding
is the normal op's (one per signature) and so is the launcher table it
copies, whose launchers the checked library's symbols replace.

  CPU   -fsanitize=address,undefined -fno-sanitize-recover=all -g -O1
        -fno-omit-frame-pointer (the worker runs with libasan preloaded)
  CUDA  -lineinfo (the worker runs under compute-sanitizer --tool memcheck)
"""
from __future__ import annotations

import os
from pathlib import Path

from registry import _core

CPU_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1", "-fno-omit-frame-pointer"]
CPU_LINK_FLAGS = ["-fsanitize=address,undefined"]
CUDA_FLAGS = ["-lineinfo"]
VARIANT = "checked"


def flavor_of(backend: str) -> str:
    return "asan" if backend == "cpu" else "memcheck"


class Variant:
    """The checked build of one kernel version: library path, launchers per op, the kernel's folder."""

    def __init__(self, library: str, launchers: dict, original: Path, cubin: str):
        self.library, self.launchers, self.original, self.cubin = library, launchers, original, cubin

    def original_path(self, path: str) -> str:
        """A path the compiler recorded, as the user's file when it is one (a
        build folder's "../" runs folded: compilers record what they were given)."""
        normal = os.path.normpath(path)
        for prefix in (str(self.original), os.path.realpath(self.original)):
            if normal.startswith(prefix + os.sep):
                return str(self.original / normal[len(prefix) + 1:])
        return path


_variants: dict[tuple[str, str, str], Variant] = {}  # (kernel, backend, normal build's key) -> its variant


def variant(kernel: str, backend: str, key: str) -> Variant:
    found = _variants.get((kernel, backend, key))
    if found is None:
        found = _variants[(kernel, backend, key)] = _build(kernel, backend)
    return found


def derive(manifest, backend: str):
    """The kernel's manifest as its checked build (core/derived_manifest.h)."""
    if backend == "cpu":
        return _core.with_extra_flags(manifest, backend, CPU_FLAGS, CPU_LINK_FLAGS, VARIANT)
    return _core.with_extra_flags(manifest, backend, CUDA_FLAGS, [], VARIANT)


def _build(kernel: str, backend: str) -> Variant:
    from registry.dtypes import NAMES
    from registry.resolve import find, resolve
    from registry.state import STATE

    derived = derive(find(kernel), backend)
    state = resolve(kernel, backend, False, lambda *_: None, derived, load_ops=False)
    path = state.status.artifacts["kernel library"]
    launchers = {spec.name: {NAMES.index(dtype): (path, symbol)
                             for dtype, symbol in zip(spec.dtypes, _core.required_launchers([spec]))}
                 for spec in derived.ops}
    cubin = ""
    normal = STATE.kernels.get((kernel, backend))
    if normal is not None:  # device code of the normal build (a cubin is bound as is, memcheck still watches it)
        cubin = normal.status.artifacts.get("device code (cubin)", "")
    return Variant(path, launchers, Path(derived.dir), cubin)
