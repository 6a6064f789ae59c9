"""builder/launch_runtime.py: the launch runtime of cubin launcher libraries is
one object per compiler, compiled once and linked into each library, so a
launcher library is one compile-and-link of its own source."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import CHECKOUT
from registry import _core, command_lines
from registry.builder import launch_runtime, recipe
from registry.builder.step import LAUNCH_RUNTIME

CXX = shutil.which(os.environ.get("CXX") or "c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")


def test_the_object_is_compiled_once_and_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    first, log = launch_runtime.ensure_object(CXX)
    assert first is not None, log
    stamp = first.stat().st_mtime_ns
    again, _ = launch_runtime.ensure_object(CXX)
    assert again == first and again.stat().st_mtime_ns == stamp  # not compiled a second time
    assert not list(first.parent.glob("*.partial"))


def test_the_object_is_named_by_what_it_is_made_from(tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    before = launch_runtime.object_path(CXX)
    header = tmp_path / "abi.h"
    header.write_text(launch_runtime._HEADERS[1].read_text() + "\n/* edited */\n")
    monkeypatch.setattr(launch_runtime, "_HEADERS", [launch_runtime._HEADERS[0], header])
    edited = launch_runtime.object_path(CXX)
    assert edited != before
    composed = command_lines.launch_runtime_compile
    monkeypatch.setattr(command_lines, "launch_runtime_compile", lambda *args: [*composed(*args), "-g"])
    assert launch_runtime.object_path(CXX) not in (before, edited)


def test_a_cubin_launcher_library_is_one_compile_and_link(tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    manifest = _core.parse_manifest(str(CHECKOUT / "kernels" / "axpy_nvrtc" / "kernel.toml"))
    plan = recipe.lib_plan(manifest, "cuda", "ab" * 16)
    assert any(os.path.samefile(s, LAUNCH_RUNTIME) for s in plan.sources)  # still a source: the key covers it
    assert plan.links_launch_runtime()
    assert [os.path.basename(s) for s in plan.compiled_sources()] == ["axpy_launch.cpp"]
    assert plan.one_step()
    checked = recipe.lib_plan(manifest, "cuda", "ab" * 16)
    checked.ldflags.append("-fsanitize=address")  # a checked build compiles everything with its sanitizer
    assert not checked.links_launch_runtime() and len(checked.compiled_sources()) == 2
