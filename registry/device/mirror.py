"""The staging mirror's layout: where a project file sits in the folder a
device compiler is given (src/k/ the kernel's folder, src/r/ the registry's
headers, src/p<i>/ each header package's import folder), and which files a
device unit includes. Shared by the driver (cubin_build.py) and the compilers
that build from the mirror (nvrtc_pch.py's compile server).
"""
from __future__ import annotations

import os
from pathlib import Path

from registry.builder import keys
from registry.errors import RegistryError


def device_sources(manifest) -> list[str]:
    """The files the unit includes, in order: the prelude first (device/nvrtc_pch.py),
    the link sources last (compiled apart from the rest: device/lto_link.py)."""
    prelude = [manifest.cuda.prelude] if manifest.cuda.prelude else []
    files = prelude + list(manifest.cuda.device_sources) + list(manifest.cuda.link_sources)
    return [str(Path(manifest.dir) / s) for s in files]


def mirrored_files(src: str) -> dict[str, bytes]:
    """A staging mirror's files: name relative to src -> bytes."""
    found = {}
    for folder, _, names in os.walk(src):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, src)] = f.read()
    return found


def mirror_roots(manifest) -> list[tuple[str, str]]:
    """(real folder, its name in the mirror): the kernel's folder, the registry's
    headers and each header package's import folder (mirrored as the kernel's
    files are: the compiler reads only bytes the key covered).
    Strings, not pathlib: an edit's compile maps a few dozen paths, and
    pathlib's resolve() and relative_to() cost ~10 ms of it on the H200 host."""
    return [(os.path.realpath(manifest.dir), "k"), (os.path.realpath(keys.REGISTRY_INCLUDE), "r"),
            *((os.path.realpath(p.root), f"p{i}") for i, p in enumerate(keys.header_packages(manifest)))]


def mirror_path(path: str, manifest, staging: Path, roots=None) -> str:
    real = os.path.realpath(path)
    for root, name in roots or mirror_roots(manifest):
        if real == root:
            return os.path.join(staging, "src", name)
        if real.startswith(root + "/"):
            return os.path.join(staging, "src", name, real[len(root) + 1:])
    raise RegistryError(f"{path} is outside the kernel's folder {manifest.dir}, the registry's headers and the "
                        "manifest's header_packages; device code may include only files inside them (or the CUDA "
                        "headers): copy the file into the kernel's folder")
