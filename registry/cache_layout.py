"""Paths inside the cache folder. The layout (and its version folder, "v1")
is defined once, in registry/core/cache_store.h, and read from there."""
from __future__ import annotations

from pathlib import Path

from registry import _core, knobs


def path(what: str, root: Path | str | None = None) -> Path:
    """`what` is a name of _core.CACHE_LAYOUT: "generated", "toolchains",
    "cuda_arch", "inline", "tmp", "ccache_bin", "objects", "memo", "root", ..."""
    return Path(knobs.cache_dir() if root is None else root) / _core.CACHE_LAYOUT[what]
