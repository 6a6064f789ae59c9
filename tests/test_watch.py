"""registry.watch: edits rebuild and hot-swap from a background thread; a
broken edit reports the error once and keeps the old code running."""
from __future__ import annotations

import time

import pytest
import torch

import registry

WAIT_S = 120  # a CPU rebuild takes a few seconds; a loaded machine, more


def _bias(op) -> float:
    x, y = torch.randn(17), torch.randn(17)
    return float((op(x, y, 1.5) - (1.5 * x + y)).mean())


def _wait_for(condition, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


def test_watch_rebuilds_on_edit_and_survives_a_broken_one(axpy_copy):
    op = registry.get(axpy_copy.name, device="cpu")
    lines: list[str] = []
    watcher = registry.watch(axpy_copy.name, interval=0.2, device="cpu", out=lines.append)
    try:
        assert watcher.running
        axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 2.0f")
        _wait_for(lambda: abs(_bias(op) - 2.0) < 1e-4, "the watched op to add 2")
        _wait_for(lambda: any("compiled" in line for line in lines), "the rebuild report")
        assert watcher.builds == 1 and watcher.last_error is None

        axpy_copy.edit("axpy_math.h", "+ AXPY_BIAS;", "+ AXPY_BIAS + not_declared;")
        _wait_for(lambda: watcher.last_error is not None, "the failed build")
        assert isinstance(watcher.last_error, registry.BuildError)
        assert abs(_bias(op) - 2.0) < 1e-4  # the previous code keeps running
        report = next(line for line in lines if "build failed" in line)
        assert "axpy_math.h:13" in report and "not_declared" in report
        time.sleep(1.0)  # five intervals: the unchanged broken source is not compiled again
        assert watcher.failures == 1

        axpy_copy.edit("axpy_math.h", "+ AXPY_BIAS + not_declared;", "+ AXPY_BIAS + 3.0f;")
        _wait_for(lambda: abs(_bias(op) - 5.0) < 1e-4, "the fixed source to load")
        _wait_for(lambda: watcher.last_error is None, "the error to clear")
    finally:
        watcher.stop()
    assert not watcher.running
    assert "stopped" in repr(watcher)


def test_watch_rejects_a_bad_interval(axpy_copy):
    with pytest.raises(ValueError, match="interval"):
        registry.watch(axpy_copy.name, interval=0)
