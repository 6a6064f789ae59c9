"""How many config builds registry.tune runs at once: all of them where memory
holds their compilers, more than one per core (a compile is single-threaded:
23 CUTLASS units on 16 cores end after 23/16 of one at once, after two in
waves of 16), and no more than memory holds. The builds here are stand-ins
that record how many overlap."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from registry import _core
from registry.builder import parallelism
from registry.tuning import search as tuning

MANIFEST = """\
format = 1
[cpu]
sources = ["k.cpp"]
[[op]]
signature = "k(Tensor x) -> Tensor"
[tune]
params = { V = [0, 1, 2, 3, 4, 5] }
"""


def overlapping_builds(tmp_path, monkeypatch, cores: int, memory_bytes: int) -> int:
    (tmp_path / "kernel.toml").write_text(MANIFEST)
    (tmp_path / "k.cpp").write_text("// k\n")
    manifest = _core.parse_manifest(str(tmp_path / "kernel.toml"))
    lock, running, most = threading.Lock(), [0], [0]

    def stand_in(name, backend, rebuild, previous_of, manifest=None):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return SimpleNamespace(ops={}, status=SimpleNamespace(artifacts={}, compiled=["lib"]))

    import registry.resolve

    monkeypatch.setattr(registry.resolve, "resolve", stand_in)
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    monkeypatch.setattr(parallelism, "available_memory_bytes", lambda: memory_bytes, raising=False)
    built = tuning.build_configs("k", "cpu", manifest, manifest.tune.enumerate())
    assert built.compiled == 6
    return most[0]


def test_every_build_runs_at_once_where_memory_holds_them(tmp_path, monkeypatch):
    assert overlapping_builds(tmp_path, monkeypatch, cores=2, memory_bytes=64 << 30) == 6


def test_no_more_builds_run_at_once_than_memory_holds(tmp_path, monkeypatch):
    assert overlapping_builds(tmp_path, monkeypatch, cores=16, memory_bytes=9 << 30) == 2
