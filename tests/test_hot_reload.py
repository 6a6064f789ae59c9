"""Edits reach the running process: header-exact keys and in-process hot reload (CPU path)."""
from __future__ import annotations

import os
import time

import pytest
import torch

import registry
from axpy_edits import axpy_bias, axpy_inputs, edit_the_macro_included_header


def test_first_get_builds_and_is_correct(axpy_copy, compiles):
    op = registry.get(axpy_copy.name)
    x, y = axpy_inputs()
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)
    assert [k for _, k in compiles(axpy_copy.name)].count("kernel-lib") == 1
    assert registry.status(axpy_copy.name).outcome == "compiled"


def test_header_two_includes_deep_rebuilds_in_process(axpy_copy, compiles):
    # axpy_cpu.cpp -> axpy.h -> axpy_math.h
    op = registry.get(axpy_copy.name)
    assert axpy_bias(op) == pytest.approx(0, abs=1e-6)
    axpy_copy.edit("axpy_math.h", "+ AXPY_BIAS;", "+ AXPY_BIAS + 2.0f;")
    op2 = registry.get(axpy_copy.name)
    assert op2 is op  # the same handle now runs the new code
    assert axpy_bias(op) == pytest.approx(2.0, abs=1e-5)
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2
    assert any("axpy_math.h changed" in c for c in registry.status(axpy_copy.name).changes)


def test_header_found_through_manifest_include_dir_rebuilds(axpy_copy, compiles):
    # axpy_math.h -> include/axpy/config.h, found only through include_dirs = ["include"]
    op = registry.get(axpy_copy.name)
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 3.0f")
    registry.get(axpy_copy.name)
    assert axpy_bias(op) == pytest.approx(3.0, abs=1e-5)
    assert any("include/axpy/config.h changed" in c for c in registry.status(axpy_copy.name).changes)


def test_touch_or_same_content_save_does_not_rebuild(axpy_copy, compiles):
    registry.get(axpy_copy.name)
    header = axpy_copy.path("axpy_math.h")
    header.write_text(header.read_text())          # a save with the same bytes
    later = time.time() + 5
    os.utime(axpy_copy.path("axpy.h"), (later, later))  # a touch
    registry.get(axpy_copy.name)
    registry.get(axpy_copy.name)
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 1
    assert registry.status(axpy_copy.name).outcome in ("cache", "in-process")


def test_revert_reuses_the_earlier_build_with_zero_compiles(axpy_copy, compiles):
    op = registry.get(axpy_copy.name)
    first_key = registry.status(axpy_copy.name).key
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f")
    registry.get(axpy_copy.name)
    assert axpy_bias(op) == pytest.approx(1.0, abs=1e-5)
    before = len(compiles(axpy_copy.name))
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 1.0f", "#define AXPY_BIAS 0.0f")
    registry.get(axpy_copy.name)
    assert len(compiles(axpy_copy.name)) == before
    assert registry.status(axpy_copy.name).key == first_key
    assert registry.status(axpy_copy.name).outcome == "cache"
    assert axpy_bias(op) == pytest.approx(0.0, abs=1e-6)


def test_rebuild_true_compiles_once(axpy_copy, compiles):
    registry.get(axpy_copy.name)
    before = len(compiles(axpy_copy.name))
    op = registry.get(axpy_copy.name, rebuild=True)
    assert compiles(axpy_copy.name)[before:] == [(axpy_copy.name, "kernel-lib")]
    x, y = axpy_inputs()
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)
    assert registry.status(axpy_copy.name).changes == ["forced rebuild (rebuild=True)"]


def test_flag_change_in_manifest_changes_key(axpy_copy, compiles):
    registry.get(axpy_copy.name)
    key = registry.status(axpy_copy.name).key
    axpy_copy.edit("kernel.toml", 'cflags = ["-O3"]', 'cflags = ["-O2"]')
    registry.get(axpy_copy.name)
    status = registry.status(axpy_copy.name)
    assert status.key != key
    assert "flags.cpu: -O3 -> -O2" in status.changes
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2


def test_compile_error_raises_with_file_line_and_old_op_keeps_working(axpy_copy, compiles):
    op = registry.get(axpy_copy.name)
    good_key = registry.status(axpy_copy.name).key
    axpy_copy.edit("axpy_math.h", "return alpha * x", "return alpha * undeclared_x")
    with pytest.raises(registry.BuildError) as info:
        registry.get(axpy_copy.name)
    first = info.value.first
    assert first is not None and first.file.endswith("axpy_math.h") and first.line > 0
    assert f"axpy_math.h:{first.line}" in str(info.value)
    x, y = axpy_inputs()
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)  # the previous build still runs
    assert op.key == good_key
    # A failed build is never recorded as good: asking again compiles again and fails again.
    before = len(compiles(axpy_copy.name))
    with pytest.raises(registry.BuildError):
        registry.get(axpy_copy.name)
    assert len(compiles(axpy_copy.name)) == before + 1
    axpy_copy.edit("axpy_math.h", "return alpha * undeclared_x", "return alpha * x")
    registry.get(axpy_copy.name)
    assert registry.status(axpy_copy.name).outcome == "cache"  # the fix is the old content
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)


def test_a_new_cache_dir_never_registers_a_binding_twice(axpy_copy, compiles, tmp_path, monkeypatch):
    # Loading a second file for a TORCH_LIBRARY namespace aborts the process;
    # a binding registered here is reused even when the cache no longer has it.
    registry.get(axpy_copy.name)
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "elsewhere"))
    op = registry.get(axpy_copy.name, rebuild=True)
    x, y = axpy_inputs()
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)
    assert (axpy_copy.name, "binding") not in compiles(axpy_copy.name)


@pytest.mark.parametrize("wide_basedir", [False, True], ids=["own-basedir", "wide-ccache-basedir"])
def test_header_included_through_a_macro_is_covered_by_the_depfile(axpy_copy, compiles, cache_root, monkeypatch,
                                                                    wide_basedir):
    # The scanner cannot read `#include NAME`; the compiler's depfile, recorded
    # after the first build, makes the header part of every later key.
    if wide_basedir:
        # A base directory above both the kernel and the cache (a user's own
        # CCACHE_BASEDIR, or the remote cache's) makes the compiler's depfile name
        # the kernel's headers relative to the build folder: they must still be
        # recorded, or the macro-included header drops out of the key.
        monkeypatch.setenv("CCACHE_BASEDIR", os.path.commonpath([str(axpy_copy.dir), str(cache_root)]))
    edit_the_macro_included_header(axpy_copy)
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2
