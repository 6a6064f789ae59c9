"""A cubin travels through the team's remote cache as the kernel libraries
do: a teammate with the same device code (another checkout, another cache
root) gets it with no compile, its dependency record verified against the
files on their machine; an edit there compiles and is not answered from the
remote. No GPU: cubin_build.ensure as `get` runs it."""
from __future__ import annotations

import pytest

from conftest import KernelCopy
from device_build_helpers import ARCH, EXAMPLE
from redis_server import redis_server  # noqa: F401 (fixture)
from registry import _core
from registry.device import cubin_build


def _ensure(copy: KernelCopy, cache, remote):
    manifest = _core.parse_manifest(str(copy.path("kernel.toml")))
    return cubin_build.ensure(_core.CacheStore(str(cache)), manifest, ARCH, None, trust_memo=False, force=False,
                              remote=remote)


def test_a_teammates_get_fetches_the_cubin_with_no_compile(tmp_path, redis_server, monkeypatch):
    from registry.remote import team_cache

    first, second = tmp_path / "first", tmp_path / "second"
    mine, theirs = KernelCopy(first, EXAMPLE, "axpy_team_cubin"), KernelCopy(second, EXAMPLE, "axpy_team_cubin")
    remote = team_cache.RemoteCache(redis_server.url, "read-write", 2.0)
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(first / "cache"))
    built = _ensure(mine, first / "cache", remote)
    assert built.built is not None and remote.counts["stored"] == 1

    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(second / "cache"))
    compiles = len(cubin_build.compiles_run)
    teammate = team_cache.RemoteCache(redis_server.url, "read-write", 2.0)
    fetched = _ensure(theirs, second / "cache", teammate)
    assert len(cubin_build.compiles_run) == compiles, "the teammate compiled the cubin"
    assert teammate.counts["hit"] == 1, teammate.counts
    assert fetched.built is None and fetched.key == built.key
    assert open(fetched.path, "rb").read() == open(built.path, "rb").read()
    assert str(second / "cache") in fetched.path  # adopted into the teammate's own cache

    # An edit on the teammate's side is theirs: compiled, never a remote answer for other content.
    theirs.edit(f"include/{EXAMPLE}/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f")
    edited = _ensure(theirs, second / "cache", team_cache.RemoteCache(redis_server.url, "read-write", 2.0))
    assert edited.built is not None and edited.key != built.key


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", ARCH)
