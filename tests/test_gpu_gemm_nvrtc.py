"""kernels/gemm_nvrtc on a Hopper GPU (marked gpu): kernels/gemm's CUTLASS
GEMM with its device code through NVRTC and a precompiled prelude. Checked
against the float64 reference; an epilogue edit (a linked unit: each kernel
relinked alone, a module each) and a body edit give checked new results
without making the prelude again, and going back is answered from the
cache."""
from __future__ import annotations

import pytest
import torch

import registry

pytest.importorskip("cutlass_library", reason="kernels/gemm_nvrtc needs pip install 'kernel-registry[cutlass]'")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9, reason="needs a Hopper GPU")]

EPILOGUE = "__device__ float gemm_nvrtc::epilogue(float value) { return value; }"


def reference(a, b, c=None, bias=None, alpha=1.0, beta=0.0):
    d = alpha * (a.double() @ b.double())
    if c is not None:
        d = d + beta * c.double()
    if bias is not None:
        d = d + bias.double()
    return d


def close(got, want, dtype, k):
    rtol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    return torch.allclose(got.double(), want, rtol=rtol, atol=rtol * max(1.0, k ** 0.5))


def operands(dtype, m=512, k=256, n=384, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(m + k + n + seed)
    a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
    b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
    c = torch.randn(m, n, device="cuda", generator=gen).to(dtype)
    bias = torch.randn(n, device="cuda", generator=gen).to(dtype)
    return a, b, c, bias


@pytest.fixture(scope="session")
def pairs_epilogue(kernels_root) -> str:
    """A copy of kernels/gemm_nvrtc built with GEMM_EPILOGUE_ROWS=0 (4-byte
    pairs of columns stored as wgmma leaves them, the shipped epilogue's
    fallback for other layouts): its name."""
    from device_build_helpers import gemm_nvrtc_copy

    return gemm_nvrtc_copy(kernels_root, "gemm_nvrtc_pairs", "GEMM_EPILOGUE_ROWS=0").name


@pytest.mark.parametrize("stores", ["rows", "pairs"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m, k, n", [(512, 256, 384), (200, 64, 264), (129, 320, 8)])
def test_gpu_against_float64(request, stores, dtype, m, k, n):
    """Whole and partial tiles (the epilogue stores only what lies inside m
    and n), each epilogue term alone and all together, with the shipped
    epilogue (16-byte pieces of rows) and with GEMM_EPILOGUE_ROWS=0."""
    name = "gemm_nvrtc" if stores == "rows" else request.getfixturevalue("pairs_epilogue")
    gemm = registry.get(name, device="cuda")
    a, b, c, bias = operands(dtype, m, k, n)
    assert close(gemm(a, b), reference(a, b), dtype, k)
    assert close(gemm(a, b, c=c, beta=0.5), reference(a, b, c, None, 1.0, 0.5), dtype, k)
    assert close(gemm(a, b, bias=bias, alpha=2.0), reference(a, b, None, bias, 2.0), dtype, k)
    assert close(gemm(a, b, c, bias, 0.5, 2.0), reference(a, b, c, bias, 0.5, 2.0), dtype, k)
    # beta = 0 does not read c: a c of NaN leaves d finite.
    assert close(gemm(a, b, c=torch.full_like(c, float("nan")), beta=0.0), reference(a, b), dtype, k)


def test_gpu_edits_of_the_epilogue_and_body_are_checked_and_reuse_the_prelude(kernels_root):
    from conftest import KernelCopy
    from registry.device import lto_link, nvrtc_pch

    copy = KernelCopy(kernels_root, "gemm_nvrtc", "gemm_nvrtc_edit")
    # Its own kernels' unit, not the one the tests above built (kept in the
    # process by content): its first get compiles after the prelude's PCH.
    copy.edit("gemm_device.cu", "  op(params, smem);", "  op(params, smem);  // the copy")
    a, b, c, bias = operands(torch.bfloat16)
    k = a.shape[1]
    assert close(registry.get(copy.name, device="cuda")(a, b, bias=bias), reference(a, b, bias=bias),
                 torch.bfloat16, k)
    start, links = len(nvrtc_pch.pch_events), len(lto_link.link_events)
    copy.edit("gemm_epilogue.cu", EPILOGUE, EPILOGUE.replace("return value;", "return fmaxf(value, 0.0f);"))
    relu = registry.get(copy.name, device="cuda")(a, b, bias=bias)
    assert close(relu, reference(a, b, bias=bias).clamp_min(0), torch.bfloat16, k)
    # The epilogue alone compiled: the kernels' unit kept, each kernel linked into a module of its own.
    assert nvrtc_pch.pch_events[start:] == [] and lto_link.link_events[links:] == ["a module per kernel (2)"]
    copy.edit("gemm_device.cu", "  op(params, smem);", "  op(params, smem);\n  (void)0;")
    # New operands, and the output's block poisoned: a body edit computes what
    # the last call did, and the caching allocator may hand its freed output
    # back, so a kernel that wrote nothing would pass on the old inputs.
    a2, b2, _, bias2 = operands(torch.bfloat16, seed=1)
    del relu
    torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    again = registry.get(copy.name, device="cuda")(a2, b2, bias=bias2)
    assert close(again, reference(a2, b2, bias=bias2).clamp_min(0), torch.bfloat16, k)
    # The body's unit compiled after the prelude's PCH.
    assert nvrtc_pch.pch_events[start:] == ["used"], (nvrtc_pch.pch_events, lto_link.main_unit_events,
                                                      lto_link.link_events,
                                                      [server.starts for server in nvrtc_pch._servers.values()])
    copy.edit("gemm_epilogue.cu", "return fmaxf(value, 0.0f);", "return value;")
    copy.edit("gemm_device.cu", "  op(params, smem);\n  (void)0;", "  op(params, smem);")
    back = registry.get(copy.name, device="cuda")(a, b, bias=bias)
    assert nvrtc_pch.pch_events[start:] == ["used"]  # from the cache: no compile
    assert close(back, reference(a, b, bias=bias), torch.bfloat16, k)


AOT_CHECK = """
import sys
import torch
import gemm_nvrtc_ops

a, b, bias, want = torch.load(sys.argv[1])
got = gemm_nvrtc_ops.gemm(a.cuda(), b.cuda(), bias=bias.cuda())
assert torch.equal(got.cpu(), want), (got.cpu() - want).abs().max()
assert "registry" not in sys.modules, "the package imported the JIT registry"
print("AOT-OK")
"""


@pytest.mark.slow
def test_gpu_the_aot_package_carries_the_nvrtc_cubin_and_matches_the_jit_op_bit_for_bit(tmp_path):
    """python -m registry aot gemm_nvrtc: the package carries the NVRTC-built
    cubin; installed without the registry, its op gives the JIT op's bits."""
    from aot_install import pip_install, run_installed
    from registry.tools import aot

    a, b, c, bias = operands(torch.bfloat16)
    want = registry.get("gemm_nvrtc", device="cuda")(a, b, bias=bias).cpu()
    pip_install(aot.export_package("gemm_nvrtc", tmp_path / "pkg", backends=["cuda"]), tmp_path / "site")
    torch.save((a.cpu(), b.cpu(), bias.cpu(), want), tmp_path / "case.pt")
    run_installed(tmp_path / "site", AOT_CHECK, str(tmp_path / "case.pt"), cwd=tmp_path)
