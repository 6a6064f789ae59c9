"""Header libraries from installed Python packages: a manifest's
`header_packages = ["nvidia-cutlass"]`, found on this machine.

The table of packages a manifest may name, and what a found package adds to
a build (include dirs, key labels "pkg:<name>/...", the version as a key
input), are the core's (core/header_packages.h). Here: where the package is
installed and which version, asked of the installed distribution's metadata
(importlib.metadata), without importing the package: its headers are data.
The import folder is taken from the same distribution that gives the version,
so the two always describe one installation.
"""
from __future__ import annotations

import os

from registry import _core
from registry.errors import HeaderPackageMissingError


def resolve(manifest) -> list:
    """The manifest's header packages as _core.HeaderPackage, in its order;
    raises HeaderPackageMissingError naming the pip install that brings one."""
    return [find(name, manifest.name) for name in manifest.header_packages]


def find(name: str, kernel: str = ""):
    import importlib.metadata

    known = next((k for k in _core.known_header_packages() if k.distribution == name), None)
    if known is None:  # the manifest parser accepts only known names
        raise HeaderPackageMissingError(f"{name!r} is not a known header package")
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise HeaderPackageMissingError(_missing(known, kernel, "is not installed in this Python")) from None
    root = os.path.normpath(str(dist.locate_file(known.import_folder)))
    dirs = [os.path.join(root, d) for d in known.include_dirs]
    absent = [d for d in dirs if not os.path.isdir(d)]
    if absent:
        raise HeaderPackageMissingError(_missing(
            known, kernel, f"{dist.version} is installed without its headers ({absent[0]} is not a folder); "
                           "reinstall it"))
    # The metadata file is watched (core/plan.h): an upgrade is seen even when
    # no header the kernel includes changed. A distribution found some other
    # way than a dist-info folder has none to watch.
    folder = getattr(dist, "_path", None)
    metadata = os.path.join(str(folder), "METADATA") if folder is not None else ""
    return _core.HeaderPackage(name, dist.version, root, dirs, metadata if os.path.isfile(metadata) else "")


def _missing(known, kernel: str, problem: str) -> str:
    who = f"kernel {kernel!r}: " if kernel else ""
    return (f"{who}header package {known.distribution!r} (header_packages in kernel.toml) {problem}. "
            f"Install it with: pip install {known.distribution} (the version the registry is tested with: "
            f"pip install -e '.[{known.extra}]' in the registry's checkout), then call get() again.")
