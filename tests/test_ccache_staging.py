"""ccache across staging folders: every build runs in a fresh folder under the
cache (core/cache_store.h), so the same compile of the same source must hit
ccache from any of them, nvcc's included. ccache hashes the working directory
when a compile writes debug info (hash_dir); the registry turns that off,
since a staging folder's name means nothing once its outputs are published."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry import _core
from registry.builder import ccache, recipe
from registry.builder.compile import run_build


@pytest.fixture
def private_ccache(tmp_path, monkeypatch):
    if ccache.ccache_executable() is None:
        pytest.skip("no ccache on this machine (or REGISTRY_CCACHE=0)")
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    for name in ("CCACHE_HASHDIR", "CCACHE_NOHASHDIR", "CCACHE_BASEDIR", "CCACHE_DISABLE", "CCACHE_RECACHE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "ccache"


def _build_in_two_staging_folders(manifest, backend: str, cache_root: Path) -> list[tuple[int, int]]:
    """(hits, misses) of ccache for each of two builds of the same plan, each in
    a fresh staging folder as a get makes it."""
    counts = []
    for _ in range(2):
        plan = recipe.lib_plan(manifest, backend, "0" * 32)
        staging = Path(_core.CacheStore(str(cache_root)).make_staging_dir())
        before = ccache.stats()
        with ccache.compiler_environment(cache_root, os.environ.get("TORCH_CUDA_ARCH_LIST")):
            result = run_build(plan, staging)
        assert (staging / result.artifact).is_file()
        counts.append(ccache.delta(before, ccache.stats()))
    return counts


def test_nvcc_compile_hits_ccache_from_another_staging_folder(axpy_copy, cuda_toolkit, private_ccache, cache_root):
    # -g: the host side writes debug info, the case where ccache hashes the working directory.
    axpy_copy.edit("kernel.toml", 'cflags = ["-O3", "-lineinfo"]', 'cflags = ["-O3", "-lineinfo", "-g"]')
    manifest = _core.parse_manifest(str(axpy_copy.path("kernel.toml")))
    first, second = _build_in_two_staging_folders(manifest, "cuda", cache_root)
    assert first[1] >= 1, first  # the nvcc unit compiled for real
    assert second == (first[1], 0), (first, second)  # and every unit hit the second time


def test_a_user_setting_of_hash_dir_is_kept(cache_root, monkeypatch):
    monkeypatch.setenv("CCACHE_HASHDIR", "1")
    monkeypatch.delenv("CCACHE_NOHASHDIR", raising=False)
    overrides = ccache._overrides(os.environ, "/usr/bin/ccache", cache_root, "9.0", False, None, None)
    assert "CCACHE_NOHASHDIR" not in overrides
    monkeypatch.delenv("CCACHE_HASHDIR")
    overrides = ccache._overrides(os.environ, "/usr/bin/ccache", cache_root, "9.0", False, None, None)
    assert overrides["CCACHE_NOHASHDIR"] == "1"


def test_nvcc_compile_hits_ccache_from_another_checkout(tmp_path, cuda_toolkit, private_ccache):
    """Two checkouts, each with its kernels and its cache inside (the default
    layout), one ccache: the second compiles nothing."""
    import shutil

    from conftest import CHECKOUT

    counts = []
    for checkout in ("one", "two"):
        kernel = tmp_path / checkout / "kernels" / "axpy_checkout"
        shutil.copytree(CHECKOUT / "kernels" / "axpy", kernel)
        cache_root = tmp_path / checkout / "cache"
        manifest = _core.parse_manifest(str(kernel / "kernel.toml"))
        staging = Path(_core.CacheStore(str(cache_root)).make_staging_dir())
        plan = recipe.lib_plan(manifest, "cuda", "0" * 32)
        before = ccache.stats()
        with ccache.compiler_environment(cache_root, "9.0", source_dir=manifest.dir):
            run_build(plan, staging)
        counts.append(ccache.delta(before, ccache.stats()))
    assert counts[0][1] >= 1 and counts[1] == (counts[0][1], 0), counts
