"""The cubin's key is reconstructible before compiling, as the kernel
library's is: the key of the scanned files names a dependency record in the
cache, whose entries give each build's key from the other files it needed.
So going back to earlier header content finds its cubin with 0 compiles,
even when the edit in between added an include (whose file stays on disk).
NVRTC compiles here without a GPU; the nvcc -cubin case needs nvcc."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import KernelCopy
from registry import _core
from registry.device import cubin_build as device_build

ARCH = "9.0"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
KERNELS = ["axpy_nvrtc", pytest.param("axpy_cubin", marks=pytest.mark.skipif(NVCC is None, reason="needs nvcc"))]


def _build(kernel, store, previous=None, trust_memo=False):
    manifest = _core.parse_manifest(str(kernel.path("kernel.toml")))
    memo = None
    if previous is not None:
        memo = _core.Memo()
        memo.keys = {"device": previous.key}
    return device_build.ensure(store, manifest, ARCH, memo, trust_memo=trust_memo, force=False)


@pytest.mark.parametrize("source", KERNELS)
def test_reverting_an_edit_that_added_an_include_reuses_the_earlier_cubin(tmp_path, source):
    kernel = KernelCopy(tmp_path / "kernels", source, source)
    store = _core.CacheStore(str(tmp_path / "cache"))
    config = kernel.path(f"include/{source}/config.h")
    original = config.read_text()
    first = _build(kernel, store)
    assert first.built is not None
    kernel.path(f"include/{source}/extra.h").write_text("#pragma once\n#define AXPY_EXTRA 1\n")
    config.write_text(original + '#include "extra.h"\n')
    edited = _build(kernel, store, first)
    assert edited.built is not None and edited.key != first.key
    config.write_text(original)  # back to the first content; extra.h stays on disk
    start = len(device_build.compiles_run)
    reverted = _build(kernel, store, edited)
    assert device_build.compiles_run[start:] == [], "reverting the header compiled the cubin again"
    assert reverted.built is None and reverted.key == first.key
    # And forward again: the edited content's cubin too.
    config.write_text(original + '#include "extra.h"\n')
    again = _build(kernel, store, reverted)
    assert again.built is None and again.key == edited.key


@pytest.mark.parametrize("source", KERNELS)
def test_the_key_comes_from_the_record_in_a_fresh_cache_reader(tmp_path, source):
    # Another process (a fresh CacheStore, no memo) reconstructs the key from content alone.
    kernel = KernelCopy(tmp_path / "kernels", source, source)
    first = _build(kernel, _core.CacheStore(str(tmp_path / "cache")))
    start = len(device_build.compiles_run)
    again = _build(kernel, _core.CacheStore(str(tmp_path / "cache")))
    assert device_build.compiles_run[start:] == [] and again.key == first.key
