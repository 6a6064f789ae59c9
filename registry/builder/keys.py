"""The vocabulary of a kernel's build inputs, for the places that need a
piece of it outside a `get`: tools (aot.py), the NVRTC path, tests.

The keys themselves are made in the core (core/plan.h documents their
inputs): `get` asks for its whole plan in one call (resolve.py). The
functions here ask the same core functions, so nothing is spelled twice.
"""
from __future__ import annotations

from pathlib import Path

from registry import _core, command_lines, environment
from registry import header_packages as packages
from registry.knobs import REGISTRY_INCLUDE

from registry.builder.step import LAUNCH_RUNTIME  # noqa: F401  (tests and tools name it here)


def header_packages(manifest) -> list:
    """The manifest's header packages as found here (core/header_packages.h)."""
    return packages.resolve(manifest)


def include_dirs(manifest) -> list[str]:
    return _core.include_dirs(manifest, str(REGISTRY_INCLUDE), header_packages(manifest))


def label_roots(manifest) -> list[tuple[str, str]]:
    """(prefix, folder) labeling a key's files (core/build_keys.h)."""
    return _core.key_label_roots(manifest, str(REGISTRY_INCLUDE), header_packages(manifest))


def uses_nvrtc(manifest, backend: str) -> bool:
    """Device code through NVRTC: `sources` are then host launchers only."""
    return backend_spec(manifest, backend).device_compiler == "nvrtc"


def uses_device_module(manifest, backend: str) -> bool:
    """Device code in its own cubin (compiler = "nvrtc" or "nvcc-cubin"),
    loaded with the driver API: `sources` are then host launchers only."""
    return backend_spec(manifest, backend).device_compiler != ""


def backend_spec(manifest, backend: str):
    return environment.section(manifest, backend)


def kernel_sources(manifest, backend: str) -> list[str]:
    return _core.kernel_sources(manifest, backend, str(REGISTRY_INCLUDE))


def nvcc_flags(manifest) -> list[str]:
    """What nvcc gets from the manifest (command_lines.nvcc_flags)."""
    return command_lines.nvcc_flags(list(manifest.cflags), list(manifest.cuda.cflags))


def kernel_files(manifest, backend: str) -> tuple[list[str], list[str]]:
    """(every file the scan finds the kernel library depends on, unresolved includes)."""
    sources = kernel_sources(manifest, backend)
    headers = [str(Path(manifest.dir) / h) for h in manifest.headers]
    closure = _core.scan_include_closure(sources + headers, include_dirs(manifest))
    files = set(closure.files) | ({manifest.file} if not manifest.inline_text else set())  # a cell's is no file
    return sorted(files), list(closure.unresolved)


def built_directly(manifest, backend: str) -> bool:
    """Torch-free libraries the registry compiles itself (direct.py):
    CPU kernel libraries and the host launchers of device code in a cubin."""
    return _core.built_directly(manifest, backend)


def kernel_lib_key(manifest, backend: str, files: list[str], env: dict[str, str]):
    """The base key of the kernel library over `files` (core/plan.h)."""
    return _core.kernel_lib_key(manifest, backend, env, files, str(REGISTRY_INCLUDE), header_packages(manifest))


def binding_namespace(signature, backend: str) -> str:
    return _core.binding_namespace(signature, backend)


def binding_key(backend: str, env: dict[str, str]):
    """The shared binding's key (core/build_keys.h): no signature in it."""
    return _core.binding_key(backend, env, str(REGISTRY_INCLUDE))
