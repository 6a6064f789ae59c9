"""registry.status and the notebook's messages give each duration in one
rule: ms below a second, s from a second on."""
from __future__ import annotations

import re

import pytest

from registry.state import Status, duration_text


@pytest.mark.parametrize("seconds, text", [
    (0.0000012, "0.001 ms"), (0.0042, "4.2 ms"), (0.25, "250 ms"), (0.9994, "999 ms"),
    (1.0, "1.00 s"), (12.345, "12.3 s"), (250.0, "250 s"),
])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def _status(get_seconds, build_seconds, last_build_seconds) -> str:
    status = Status(kernel="axpy", backend="cpu", outcome="compiled", key="k" * 32, manifest="/k/kernel.toml",
                    artifacts={}, build_seconds=build_seconds, last_build_seconds=last_build_seconds, built_at=0,
                    changes=(), compiled=["kernel-lib"])
    status.get_seconds = get_seconds
    return str(status)


def test_status_gives_short_times_in_ms_and_long_ones_in_s():
    text = _status(get_seconds=0.43, build_seconds=0.41, last_build_seconds=2.5)
    assert "last get: compiled in 430 ms, compiled kernel-lib in 410 ms" in text
    assert re.search(r"built .* in 2\.50 s", text)
    text = _status(get_seconds=1.7, build_seconds=1.6, last_build_seconds=0.2)
    assert "last get: compiled in 1.70 s, compiled kernel-lib in 1.60 s" in text
    assert re.search(r"built .* in 200 ms", text)
