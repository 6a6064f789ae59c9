"""The fast entry's CUDA outputs (core/fast_entry.h, stable_binding_text.cc).

On a torch without torch_tensor_to_pyobject (before 2.14) an output is raw
memory of torch's CUDA caching allocator handed to Python through DLPack;
from 2.14 on, the tensor torch allocated. Either way the user gets a plain
CUDA tensor of the right shape, dtype and device, whose memory goes back to
the allocator with the tensor, and the device guard is taken only when the
inputs are not on the current device.
"""
from __future__ import annotations

import pytest
import torch

import registry

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cache_root"),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_outputs_are_plain_cuda_tensors_of_the_right_values(dtype):
    layernorm = registry.get("layernorm", device="cuda")
    assert layernorm._fast is not None
    x = torch.randn(37, 1000, device="cuda", dtype=dtype)
    w, b = torch.randn(1000, device="cuda", dtype=dtype), torch.randn(1000, device="cuda", dtype=dtype)
    outs = layernorm._fast(x, w, b, 1e-5)  # three outputs: y, mean, rstd
    assert isinstance(outs, tuple) and len(outs) == 3
    for out in outs:
        assert type(out) is torch.Tensor and out.is_cuda and out.device == x.device and out.is_contiguous()
    y = outs[0]
    assert y.dtype == dtype and y.shape == x.shape and outs[1].shape == (37,)
    want = torch.nn.functional.layer_norm(x.float(), (1000,), w.float(), b.float(), 1e-5)
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    assert torch.allclose(y.float(), want, atol=tol, rtol=tol)
    y.add_(1)  # an output is the caller's to write, like any torch tensor


def test_outputs_give_their_memory_back_with_the_tensor():
    softmax = registry.get("softmax", device="cuda")
    x = torch.randn(256, 4096, device="cuda")
    softmax(x)  # warm: the allocator's blocks exist
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    outs = [softmax(x) for _ in range(50)]
    assert torch.cuda.memory_allocated() >= before + 50 * x.numel() * 4
    assert all(torch.equal(o, outs[0]) for o in outs)
    del outs
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


def test_an_output_outlives_the_op_and_its_inputs():
    softmax = registry.get("softmax", device="cuda")
    x = torch.randn(3, 333, device="cuda")
    want = torch.softmax(x, -1)
    y = softmax(x)
    del x
    torch.cuda.empty_cache()
    assert torch.allclose(y, want, atol=1e-6)


def test_an_empty_output_is_a_tensor_too():
    softmax = registry.get("softmax", device="cuda")
    y = softmax(torch.empty(0, 7, device="cuda"))
    assert y.shape == (0, 7) and y.is_cuda


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_inputs_on_another_device_than_the_current_one():
    softmax = registry.get("softmax", device="cuda")
    x = torch.randn(8, 100, device="cuda:1")
    with torch.cuda.device(0):
        y = softmax(x)
    assert y.device == x.device
    assert torch.allclose(y, torch.softmax(x, -1), atol=1e-6)
