"""A key computed while another thread builds is the key computed alone.

A build sets CXX (and PYTORCH_NVCC, TORCH_CUDA_ARCH_LIST) to its own ccache
wrapper for torch's load() for as long as it runs; registry.tune builds
configs side by side in threads. A key that read the wrapper would name a
path inside one cache root: another process, or a teammate, would compute
a different key for the same code and build it again.
"""
from __future__ import annotations

import os

import pytest

from registry import environment, knobs
from registry.builder import ccache


@pytest.mark.skipif(ccache.ccache_executable() is None, reason="needs ccache (its wrapper is what a build sets)")
def test_the_toolchain_a_key_covers_is_the_users_during_a_build(tmp_path):
    alone = environment.build_environment("cpu", tmp_path)
    with ccache.compiler_environment(tmp_path, None):
        assert os.environ["CXX"] != environment.cxx_command(), "expected the build's wrapper in CXX"
        during = environment.build_environment("cpu", tmp_path)
    assert during == alone


def test_user_env_is_the_value_from_before_the_overrides(monkeypatch):
    monkeypatch.setenv("KREG_TEST_VARIABLE", "the user's")
    monkeypatch.delenv("KREG_TEST_UNSET", raising=False)
    with knobs.environment_overrides({"KREG_TEST_VARIABLE": "a build's", "KREG_TEST_UNSET": "a build's"}):
        assert os.environ["KREG_TEST_VARIABLE"] == "a build's"
        assert knobs.user_env("KREG_TEST_VARIABLE") == "the user's"
        assert knobs.user_env("KREG_TEST_UNSET") is None
    assert knobs.user_env("KREG_TEST_VARIABLE") == "the user's" and "KREG_TEST_UNSET" not in os.environ
