"""ld's "cannot find -lcudart" where CUDA_HOME is unset and torch guessed a
prefix without the toolkit (the folder above a wrapper nvcc on PATH): the
build error says what torch took and which CUDA_HOME to set. The linker's
real message comes from linking against a prefix with no CUDA runtime."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from registry.builder import cuda_home
from registry.builder.failure import build_error
from registry.builder.step import BuildPlan


def _real_link_log(tmp_path, prefix) -> str:
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    (tmp_path / "m.cpp").write_text("int kreg_probe() { return 0; }\n")
    done = subprocess.run([compiler, "-shared", "-fPIC", str(tmp_path / "m.cpp"), f"-L{prefix}/lib64", "-lcudart",
                           "-o", str(tmp_path / "m.so")], capture_output=True, text=True)
    assert done.returncode != 0
    return done.stdout + done.stderr


def test_a_missing_cuda_runtime_says_which_cuda_home_to_set(tmp_path, monkeypatch):
    import torch.utils.cpp_extension as extension

    guessed = tmp_path / "usr-local"  # what torch takes above /usr/local/bin/nvcc: no lib64/libcudart.so
    (guessed / "bin").mkdir(parents=True)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(extension, "CUDA_HOME", str(guessed))
    log = _real_link_log(tmp_path, guessed)
    assert "cannot find -lcudart" in log, log
    plan = BuildPlan(kernel="axpy", backend="cuda", kind="binding", module_name="kreg_binding_cuda",
                     sources=[str(tmp_path / "m.cpp")], manifest_file=str(tmp_path / "kernel.toml"))
    error = build_error(plan, log, tmp_path)
    message = error.first.message
    assert "CUDA_HOME is not set" in message and str(guessed) in message, message
    assert "set CUDA_HOME=" in message and "restart" in message, message
    found = cuda_home.toolkit_candidates()
    if found:  # this machine has a toolkit: the message names it
        assert f"CUDA_HOME={found[0]} " in message, message


def test_a_cuda_home_without_the_runtime_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda-here"))
    log = _real_link_log(tmp_path, tmp_path / "no-cuda-here")
    [diagnostic] = cuda_home.diagnostics(log, "kernel.toml")
    assert f"CUDA_HOME={tmp_path / 'no-cuda-here'} has no lib64/libcudart.so" in diagnostic.message
