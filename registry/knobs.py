"""Every environment variable the registry reads, declared once.

Read through these functions (not os.environ) so tests can scope a knob with
monkeypatch.setenv and so the documentation below stays the whole list.

REGISTRY_CACHE_DIR     cache root (default: <checkout>/cache)
REGISTRY_KERNELS_PATH  extra kernel roots, os.pathsep-separated, searched
                       before <checkout>/kernels
REGISTRY_DEVICE        "cpu" or "cuda": which backend `get` builds when the
                       call does not say (default: cuda when available)
REGISTRY_CCACHE        "0" turns ccache off (default: on when ccache is found)
REGISTRY_LOCK_TIMEOUT  seconds a build waits for another process building the
                       same key before giving up (default: 600)
REGISTRY_VERBOSE       "1" prints the build commands
"""
from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    return Path(os.environ.get("REGISTRY_CACHE_DIR") or CHECKOUT / "cache")


def kernel_roots() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("REGISTRY_KERNELS_PATH", "").split(os.pathsep) if p]
    return [*extra, CHECKOUT / "kernels"]


def device() -> str | None:
    value = os.environ.get("REGISTRY_DEVICE", "").strip().lower()
    if value and value not in ("cpu", "cuda"):
        raise ValueError(f"REGISTRY_DEVICE must be 'cpu' or 'cuda', not {value!r}")
    return value or None


def ccache_enabled() -> bool:
    return os.environ.get("REGISTRY_CCACHE", "1") != "0"


def lock_timeout() -> float:
    return float(os.environ.get("REGISTRY_LOCK_TIMEOUT", "600"))


def verbose() -> bool:
    return os.environ.get("REGISTRY_VERBOSE", "0") == "1"
