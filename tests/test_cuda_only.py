"""A CUDA-only kernel on a machine without a GPU: one message says what is
possible here (no circle between "add [cpu] or ask for device='cuda'" and "no
CUDA device is visible; build for the CPU"), and a CUDA build from the command
line does not print torch's "No CUDA runtime is found"."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import torch

import registry
from conftest import CHECKOUT, KernelCopy, _counter
from reliability_helpers import binding_seed, child_env, private_cache, private_kernels  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="about a machine without a GPU")


def _cuda_only(root) -> KernelCopy:
    copy = KernelCopy(root, "axpy", f"axpy_t{next(_counter)}")
    text = copy.path("kernel.toml").read_text()
    copy.path("kernel.toml").write_text(re.sub(r"\[cpu\]\nsources = \[[^\]]*\]\ncflags = \[[^\]]*\]\n", "", text))
    assert "[cpu]" not in copy.path("kernel.toml").read_text()
    return copy


def test_a_cuda_only_kernel_says_once_what_is_possible_here(kernels_root, monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    copy = _cuda_only(kernels_root)
    messages = []
    for device in (None, "cpu", "cuda"):
        with pytest.raises(registry.RegistryError) as info:
            registry.get(copy.name, device=device)
        messages.append(str(info.value))
    for message in messages:
        assert "no CUDA device is visible" in message, message
        assert "[cpu]" in message and "TORCH_CUDA_ARCH_LIST" in message, message
        assert "ask for device='cuda'" not in message, message   # that is the circle's other half
        assert "build for the CPU (device='cpu')" not in message, message  # there is no CPU build
    assert len(set(messages)) == 1, messages


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_cli_cuda_build_does_not_print_no_cuda_runtime(private_cache, private_kernels):  # noqa: F811
    copy = KernelCopy(private_kernels, "axpy", "axpy_cudacli")
    copy.edit("axpy.cu", "#include", "this is not CUDA;\n#include")  # fails fast: the point is what prints first
    env = child_env(private_cache, private_kernels, REGISTRY_DEVICE="cuda", TORCH_CUDA_ARCH_LIST="9.0")
    done = subprocess.run([sys.executable, "-m", "registry", "build", copy.name, "--device", "cuda"], env=env,
                          cwd=str(CHECKOUT), capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "axpy.cu" in done.stderr, done
    assert "No CUDA runtime is found" not in done.stdout + done.stderr, done.stderr
