"""A linked kernel's image of a module per kernel, on a GPU (marked gpu): a
copy of kernels/axpy_nvrtc whose element operation ends in a function of a
[cuda] link_sources file. The first get links every kernel into one module;
an edit of the link source links each kernel alone into a module of its own
(registry/device/lto_link.py, module_images.py), and the launcher must find
the vector kernel and the scalar kernel, of every dtype, each in its module;
a revert is the first build again, from the cache. The same in an isolated
worker. `python -m pytest -m gpu tests/test_gpu_linked_modules.py -v`.
"""
from __future__ import annotations

import pytest
import torch

import registry
from conftest import _counter
from device_build_helpers import copy_example
from registry.device import lto_link

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ELEMENT = "AXPY_HD float axpy_element(float alpha, float x, float y) { return alpha * x + y + AXPY_BIAS; }"
LINKED_ELEMENT = """#ifdef __CUDACC__
__device__ float axpy_epilogue(float v);  // defined in epilogue.cu, a link source
#else
inline float axpy_epilogue(float v) { return v; }
#endif
AXPY_HD float axpy_element(float alpha, float x, float y) { return axpy_epilogue(alpha * x + y + AXPY_BIAS); }"""
EPILOGUE = "__device__ float axpy_epilogue(float v) {{ return v * {scale}f; }}\n"


@pytest.fixture
def linked(kernels_root):
    number = next(_counter)
    copy = copy_example(kernels_root, "nvrtc", f"_linked{number}")
    # A main unit of its own (the process and the cache keep one by content):
    # its first link has not yet named the kernels.
    copy.edit("axpy_math.h", ELEMENT, f"// copy {number}\n{LINKED_ELEMENT}")
    copy.path("epilogue.cu").write_text(EPILOGUE.format(scale=2.0))
    copy.edit("kernel.toml", 'compiler = "nvrtc"', 'compiler = "nvrtc"\nlink_sources = ["epilogue.cu"]')
    return copy


def _check(op, scale: float) -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n, offset in ((1 << 16, 0), (1 << 16, 1), (17, 0)):  # vector body and tail; misaligned: scalar only
            gen = torch.Generator().manual_seed(n + offset)
            base = torch.randn(n + offset, generator=gen).to("cuda", dtype)
            x, y = base[offset:], torch.randn(n, generator=gen).to("cuda", dtype)
            want = (scale * (0.5 * x.double() + y.double())).to(dtype)
            tol = 1e-5 if dtype == torch.float32 else 2e-2
            torch.testing.assert_close(op(x, y, 0.5), want, atol=tol, rtol=tol)


@pytest.mark.parametrize("isolate", [False, True])
def test_each_kernel_found_in_its_own_module(linked, isolate):
    start = len(lto_link.link_events)
    _check(registry.get(linked.name, device="cuda", isolate=isolate), 2.0)
    linked.path("epilogue.cu").write_text(EPILOGUE.format(scale=4.0))
    _check(registry.get(linked.name, device="cuda", isolate=isolate), 4.0)
    events = lto_link.link_events[start:]
    assert events[0] == "one module" and events[1].startswith("a module per kernel"), events
    linked.path("epilogue.cu").write_text(EPILOGUE.format(scale=2.0))
    _check(registry.get(linked.name, device="cuda", isolate=isolate), 2.0)
    assert len(lto_link.link_events) == start + 2  # the revert linked nothing
