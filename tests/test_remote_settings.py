"""The remote cache's settings: the URL, the mode, the timeout, and what
ccache is told. No server needed."""
from __future__ import annotations

import pytest

from registry import knobs
from registry.builder import ccache
from registry.remote import team_cache


def test_url_forms_and_the_password_never_shown():
    full = team_cache.RemoteURL("redis://builder:s%40cret@cache.lab:7000/3")
    assert (full.host, full.port, full.db, full.username, full.password) == ("cache.lab", 7000, 3, "builder", "s@cret")
    assert full.display == "redis://cache.lab:7000/3"
    bare = team_cache.RemoteURL("redis://p4ss@10.0.0.5")  # one name before @: a password, as ccache reads it
    assert (bare.port, bare.db, bare.username, bare.password) == (6379, 0, None, "p4ss")
    for bad in ("http://cache.lab", "cache.lab:6379", "redis://cache.lab:port", "redis://h/not-a-db"):
        with pytest.raises(ValueError, match="REGISTRY_REMOTE_CACHE"):
            team_cache.RemoteURL(bad)
    with pytest.raises(ValueError) as error:
        team_cache.RemoteURL("rediss://u:topsecret@h")
    assert "topsecret" not in str(error.value)


def test_knobs(monkeypatch):
    monkeypatch.delenv("REGISTRY_REMOTE_CACHE", raising=False)
    assert knobs.remote_cache() is None and team_cache.current() is None
    monkeypatch.setenv("REGISTRY_REMOTE_CACHE", "redis://127.0.0.1:1")
    assert team_cache.current() is team_cache.current() and team_cache.current().writable
    monkeypatch.setenv("REGISTRY_REMOTE_CACHE_MODE", "read-only")
    assert not team_cache.current().writable  # a new setting, a new remote
    monkeypatch.setenv("REGISTRY_REMOTE_CACHE_MODE", "sometimes")
    with pytest.raises(ValueError, match="read-write"):
        knobs.remote_mode()
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("REGISTRY_REMOTE_TIMEOUT", bad)
        with pytest.raises(ValueError, match="REGISTRY_REMOTE_TIMEOUT"):
            knobs.remote_timeout()


def test_ccache_gets_the_same_server_its_timeouts_and_the_mode():
    rw = team_cache.RemoteCache("redis://u:p@h:7000/2", "read-write", 0.25)
    assert rw.ccache_storage() == "redis://u:p@h:7000/2|connect-timeout=250|operation-timeout=250"
    ro = team_cache.RemoteCache("redis://h", "read-only", 1.0)
    assert ro.ccache_storage() == "redis://h|connect-timeout=1000|operation-timeout=1000|read-only"


def test_base_dir_covers_kernel_and_cache_but_is_never_the_root(tmp_path):
    cache, kernel = tmp_path / "proj" / "cache", tmp_path / "proj" / "kernels" / "axpy"
    assert ccache.base_dir(cache, str(kernel)) == str(tmp_path / "proj")
    assert ccache.base_dir(cache, None) == str(cache)
    assert ccache.base_dir(cache, "/opt/kernels/axpy") == str(cache)  # they share only "/"
