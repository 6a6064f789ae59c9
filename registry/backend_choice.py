"""Which backend a request runs on: the one rule, asked by every caller.

A device named by the caller wins, then REGISTRY_DEVICE; with neither, CUDA
when the kernel has a [cuda] section and a GPU is visible, else the CPU. "Is a
GPU visible" is environment.cuda_available: memoized in the cache per machine
identity, so a cached `get` on a CPU machine never starts the CUDA driver.
"""
from __future__ import annotations

from registry import _core, knobs


def requested(device: str | None) -> str | None:
    """The device asked for: the caller's, else REGISTRY_DEVICE, else None."""
    return device or knobs.device()


def backend_for(device: str | None, has_cuda: bool = True) -> str:
    """"cpu" or "cuda": `device` if named (after REGISTRY_DEVICE), else the
    default for a kernel that has (or not) a [cuda] section."""
    chosen = requested(device)
    if chosen is not None:
        return chosen
    from registry import environment

    return "cuda" if has_cuda and environment.cuda_available(knobs.cache_dir()) else "cpu"


def for_manifest(manifest, requested: str | None, cache_root) -> str:
    """The backend a `get` of this kernel builds: `requested` (the caller's
    device, after REGISTRY_DEVICE) if given, else backend_for's default. Says
    what to change when the kernel has no section for it."""
    if requested is None:
        from registry import environment

        requested = "cuda" if manifest.cuda.present and environment.cuda_available(cache_root) else "cpu"
    spec = section(manifest, requested)
    if spec.device_compiler and manifest.binding == "pybind":
        raise _core.RegistryError(
            f"kernel {manifest.name!r}: compiler = \"{spec.compiler}\" needs the generated binding (its "
            f"launchers are bound to the cubin's module); remove binding = \"pybind\" from {manifest.file}, "
            f"or use compiler = \"nvcc\""
        )
    if not spec.present:
        raise _core.RegistryError(
            f"kernel {manifest.name!r} has no [{requested}] section in {manifest.file}; "
            f"add one, or ask for device={'cpu' if requested == 'cuda' else 'cuda'!r}"
        )
    return requested


def section(manifest, backend: str):
    """The manifest's section for `backend`: [cuda] or [cpu]."""
    return manifest.cuda if backend == "cuda" else manifest.cpu
