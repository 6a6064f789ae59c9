"""The cubin's key is reconstructible before compiling, as the kernel
library's is: the key of the scanned files names a dependency record in the
cache, whose entries give each build's key from the other files it needed.
So going back to earlier header content finds its cubin with 0 compiles,
even when the edit in between added an include (whose file stays on disk).
NVRTC compiles here without a GPU; the nvcc -cubin case needs nvcc."""
from __future__ import annotations

import pytest

from device_build_helpers import CONFIG, PATHS, build, copy_example
from registry import _core
from registry.device import cubin_build as device_build


@pytest.mark.parametrize("compiler", PATHS)
def test_reverting_an_edit_that_added_an_include_reuses_the_earlier_cubin(tmp_path, compiler):
    kernel = copy_example(tmp_path / "kernels", compiler)
    store = _core.CacheStore(str(tmp_path / "cache"))
    config = kernel.path(CONFIG)
    original = config.read_text()
    first = build(kernel, store)
    assert first.built is not None
    config.with_name("extra.h").write_text("#pragma once\n#define AXPY_EXTRA 1\n")
    config.write_text(original + '#include "extra.h"\n')
    edited = build(kernel, store, first)
    assert edited.built is not None and edited.key != first.key
    config.write_text(original)  # back to the first content; extra.h stays on disk
    start = len(device_build.compiles_run)
    reverted = build(kernel, store, edited)
    assert device_build.compiles_run[start:] == [], "reverting the header compiled the cubin again"
    assert reverted.built is None and reverted.key == first.key
    # And forward again: the edited content's cubin too.
    config.write_text(original + '#include "extra.h"\n')
    again = build(kernel, store, reverted)
    assert again.built is None and again.key == edited.key


@pytest.mark.parametrize("compiler", PATHS)
def test_the_key_comes_from_the_record_in_a_fresh_cache_reader(tmp_path, compiler):
    # Another process (a fresh CacheStore, no memo) reconstructs the key from content alone.
    kernel = copy_example(tmp_path / "kernels", compiler)
    first = build(kernel, _core.CacheStore(str(tmp_path / "cache")))
    start = len(device_build.compiles_run)
    again = build(kernel, _core.CacheStore(str(tmp_path / "cache")))
    assert device_build.compiles_run[start:] == [] and again.key == first.key
