"""registry.status(name) without a device finds the kernel whichever device
`get` loaded it for; with several loaded, the one a plain get(name) picks."""
from __future__ import annotations

import pytest
import torch

import registry

pytestmark = pytest.mark.usefixtures("cache_root")


def test_status_without_device_finds_a_kernel_loaded_for_a_named_device(axpy_copy, monkeypatch):
    monkeypatch.delenv("REGISTRY_DEVICE", raising=False)
    registry.get(axpy_copy.name, device="cpu")
    status = registry.status(axpy_copy.name)
    assert status is registry.status(axpy_copy.name, device="cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_status_without_device_finds_a_kernel_loaded_with_device_cuda(axpy_copy, monkeypatch):
    monkeypatch.delenv("REGISTRY_DEVICE", raising=False)
    registry.get(axpy_copy.name, device="cuda")
    assert registry.status(axpy_copy.name) is registry.status(axpy_copy.name, device="cuda")
    registry.get(axpy_copy.name, device="cpu")  # both loaded: the one get(name) would pick
    assert registry.status(axpy_copy.name) is registry.status(axpy_copy.name, device="cuda")


def test_status_of_a_kernel_never_loaded_still_says_to_get_it(monkeypatch):
    monkeypatch.delenv("REGISTRY_DEVICE", raising=False)
    with pytest.raises(registry.errors.NotLoadedError, match="call registry.get"):
        registry.status("axpy_never_loaded_here")
