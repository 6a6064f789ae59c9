"""Which backend a request runs on: the one rule, asked by every caller.

A device named by the caller wins, then REGISTRY_DEVICE; with neither, CUDA
when the kernel has a [cuda] section and a GPU is visible, else the CPU. "Is a
GPU visible" is environment.cuda_available: memoized in the cache per machine
identity, so a cached `get` on a CPU machine never starts the CUDA driver.
"""
from __future__ import annotations

from registry import knobs


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
