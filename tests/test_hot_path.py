"""The hot path of `get` (registry/__init__.py): one core call, StampSet.unchanged, that
reads the change watch once the stamps are watched and else stats every file
the build read; anything a stat can see must make the next get take the slow
path. (Content edits through every kind of file are in
test_hot_reload.py; these cover the stat fields one at a time.)"""
from __future__ import annotations

import os
import time

import pytest
import torch

import registry
from registry import _core
from registry.state import STATE
from axpy_edits import axpy_bias


def _restore_mtime(path, stat) -> None:
    """What a coarse clock does to a save within the same tick: the new bytes
    keep the old mtime."""
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_unchanged_is_one_plain_method_of_the_stamp_set():
    # A method descriptor (METH_NOARGS), not a pybind11 function: the cheapest
    # call CPython has, and it checks `self` before the C++ side reads it.
    assert type(_core.StampSet.unchanged).__name__ == "method_descriptor"
    assert _core.StampSet().unchanged() is True
    with pytest.raises(TypeError):
        _core.StampSet.unchanged(object())
    with pytest.raises(TypeError, match="not initialised"):
        _core.StampSet.__new__(_core.StampSet).unchanged()


def test_each_stat_field_is_seen(tmp_path):
    path = tmp_path / "a.h"
    path.write_text("abc")
    os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    stamps = _core.StampSet([str(path)])
    assert stamps.unchanged()
    before = path.stat()

    path.write_text("abcd")  # size
    _restore_mtime(path, before)
    assert not stamps.unchanged()

    path.write_text("abc")
    _restore_mtime(path, before)
    assert stamps.unchanged()  # the same stat again
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))  # one nanosecond of mtime
    assert not stamps.unchanged()

    _restore_mtime(path, before)
    replacement = tmp_path / "a.h.new"  # an editor's atomic save: a new inode, same size and mtime
    replacement.write_text("abd")
    _restore_mtime(replacement, before)
    os.replace(replacement, path)
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert not stamps.unchanged()

    path.unlink()
    assert not stamps.unchanged()


def test_an_atomic_same_size_save_with_the_old_mtime_reaches_the_next_get(axpy_copy, compiles):
    op = registry.get(axpy_copy.name, device="cpu")
    assert axpy_bias(op) == pytest.approx(0, abs=1e-6)
    config = axpy_copy.path("include/axpy/config.h")  # two includes deep, through include_dirs
    before = config.stat()
    new = config.with_name("config.h.tmp")
    new.write_text(config.read_text().replace("AXPY_BIAS 0.0f", "AXPY_BIAS 5.0f"))
    _restore_mtime(new, before)
    os.replace(new, config)
    assert config.stat().st_size == before.st_size

    assert registry.get(axpy_copy.name, device="cpu") is op
    assert axpy_bias(op) == pytest.approx(5.0, abs=1e-5)
    assert any("include/axpy/config.h changed" in c for c in registry.status(axpy_copy.name, device="cpu").changes)


def _settle(name: str, device: str) -> None:
    """Right after an edit the edited file's stamp is racy (core/file_stamp.h:
    its mtime is within a timestamp tick of the stamp), so the next get
    re-hashes it rather than trusting its stat. Wait out the tick and let one
    get re-record it: from then on the hot path answers alone."""
    time.sleep(0.15)
    registry.get(name, device=device)


def test_every_way_of_asking_finds_the_state_after_a_rebuild(axpy_copy, compiles, monkeypatch):
    monkeypatch.delenv("REGISTRY_DEVICE", raising=False)
    backend = "cuda" if torch.cuda.is_available() else "cpu"
    op = registry.get(axpy_copy.name)
    assert registry.get(axpy_copy.name, device=backend) is op
    loaded = STATE.find(axpy_copy.name, None)
    assert loaded is STATE.find(axpy_copy.name, backend) is STATE.kernels[(axpy_copy.name, backend)]

    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 4.0f")
    registry.get(axpy_copy.name, device=backend)  # rebuilt through the explicit device
    rebuilt = STATE.kernels[(axpy_copy.name, backend)]
    assert rebuilt is not loaded
    # Asking without a device must now find the rebuilt state, whose stamps
    # are the new file's: the hot path answers, and the op runs the new code.
    assert STATE.find(axpy_copy.name, None) is rebuilt
    _settle(axpy_copy.name, backend)
    assert registry.get(axpy_copy.name) is op
    assert registry.status(axpy_copy.name).outcome == "in-process"
    assert axpy_bias(op) == pytest.approx(4.0, abs=1e-5)
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2


def test_once_watched_an_unchanged_get_reads_no_file_and_edits_still_reach_it(axpy_copy, compiles):
    # The first hot check adds the change watch (core/change_watch.h) and
    # stats; from then on "nothing changed" is one read() of the watch, and
    # any edit makes the next get stat and rebuild as before.
    probe = _core.StampSet([str(axpy_copy.path("kernel.toml"))])
    if not (probe.unchanged() and probe.watched):
        pytest.skip("the kernels' folder is not on a filesystem the change watch trusts: every check stats")
    op = registry.get(axpy_copy.name, device="cpu")
    assert registry.get(axpy_copy.name, device="cpu") is op
    assert STATE.kernels[(axpy_copy.name, "cpu")].stamps.watched
    for before, after in ((0, 1), (1, 2), (2, 3)):  # same-size saves, two includes deep
        axpy_copy.edit("include/axpy/config.h", f"AXPY_BIAS {before}.0f", f"AXPY_BIAS {after}.0f")
        assert registry.get(axpy_copy.name, device="cpu") is op
        assert axpy_bias(op) == pytest.approx(after, abs=1e-5)
        _settle(axpy_copy.name, "cpu")
        assert registry.get(axpy_copy.name, device="cpu") is op
        assert registry.status(axpy_copy.name, device="cpu").outcome == "in-process"
        assert STATE.kernels[(axpy_copy.name, "cpu")].stamps.watched
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 4


def test_a_kernel_reached_through_a_symlink_is_stat_checked(axpy_copy, compiles, tmp_path, monkeypatch):
    # An edit of a symlink's target raises no event in the link's folder, so
    # such paths are never watched: every hot check stats them.
    link = tmp_path / "linked-kernels"
    link.symlink_to(axpy_copy.dir.parent, target_is_directory=True)
    monkeypatch.setenv("REGISTRY_KERNELS_PATH", str(link))
    op = registry.get(axpy_copy.name, device="cpu")
    registry.get(axpy_copy.name, device="cpu")
    stamps = STATE.kernels[(axpy_copy.name, "cpu")].stamps
    assert any(p.startswith(str(link)) for p in stamps.paths) and not stamps.watched
    axpy_copy.edit("include/axpy/config.h", "AXPY_BIAS 0.0f", "AXPY_BIAS 6.0f")  # through the real path
    assert registry.get(axpy_copy.name, device="cpu") is op
    assert axpy_bias(op) == pytest.approx(6.0, abs=1e-5)
