"""kernels/gemm: d = alpha * (a @ b) + beta * c + bias, its CPU path here,
the Hopper (CUTLASS) and portable paths on a GPU (marked gpu)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import registry

pytest.importorskip("cutlass_library", reason="kernels/gemm needs pip install 'kernel-registry[cutlass]'")


def reference(*args, **kwargs):
    """kernels/gemm/reference.py's float64 gemm, the one sweeps and checks use."""
    from registry import _core
    from registry.notebook.checks import load_reference

    manifest = _core.parse_manifest(str(Path(registry.__file__).resolve().parent.parent / "kernels/gemm/kernel.toml"))
    return load_reference(manifest).gemm(*args, **kwargs)


def close(got, want, dtype, k):
    # f32 accumulation over k terms, then one rounding to a 16-bit type.
    rtol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    atol = rtol * max(1.0, k ** 0.5)
    return torch.allclose(got.double().cpu(), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (17, 33, 9), (64, 128, 256)])
def test_cpu_epilogue_against_float64(dtype, m, k, n):
    gemm = registry.get("gemm", device="cpu")
    gen = torch.Generator().manual_seed(m * k * n)
    a, b = torch.randn(m, k, generator=gen).to(dtype), torch.randn(k, n, generator=gen).to(dtype)
    c, bias = torch.randn(m, n, generator=gen).to(dtype), torch.randn(n, generator=gen).to(dtype)
    assert close(gemm(a, b), reference(a, b), dtype, k)
    assert close(gemm(a, b, c, bias, 0.5, 2.0), reference(a, b, c, bias, 0.5, 2.0), dtype, k)
    assert close(gemm(a, b, bias=bias), reference(a, b, bias=bias), dtype, k)


def test_cpu_shapes_are_checked_with_the_names():
    gemm = registry.get("gemm", device="cpu")
    a, b = torch.randn(4, 5).bfloat16(), torch.randn(6, 3).bfloat16()
    with pytest.raises(RuntimeError, match="a.s columns must equal b's rows"):
        gemm(a, b)
    with pytest.raises(RuntimeError, match="bias must be"):
        gemm(a, torch.randn(5, 3).bfloat16(), bias=torch.randn(4).bfloat16())


def test_opcheck_and_fullgraph_compile_on_the_cpu():
    registry.get("gemm", device="cpu")
    a, b = torch.randn(8, 16).bfloat16(), torch.randn(16, 24).bfloat16()
    bias = torch.randn(24).bfloat16()
    torch.library.opcheck(torch.ops.gemm.gemm.default, (a, b, None, bias, 1.5, 0.0))
    compiled = torch.compile(lambda x, y, z: torch.ops.gemm.gemm(x, y, None, z, 1.5, 0.0) * 2, fullgraph=True)
    assert torch.equal(compiled(a, b, bias), torch.ops.gemm.gemm(a, b, None, bias, 1.5, 0.0) * 2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,k,n", [(512, 256, 384), (1000, 512, 136), (17, 33, 9), (4096, 4096, 4096)],
                         ids=["tma", "tma-ragged-m", "portable-unaligned", "tma-4096"])
@pytest.mark.parametrize("epilogue", ["plain", "alpha-beta-bias"])
def test_gpu_paths_against_float64(dtype, m, k, n, epilogue):
    gemm = registry.get("gemm", device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(m + k + n)
    a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
    b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
    args = (a, b) if epilogue == "plain" else (a, b, torch.randn(m, n, device="cuda", generator=gen).to(dtype),
                                               torch.randn(n, device="cuda", generator=gen).to(dtype), 0.5, 2.0)
    # Poison: the output is allocated through torch's caching allocator, which
    # hands the op this freed block again; an unwritten output reads NaN.
    poison = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    del poison
    got = gemm(*args)
    torch.cuda.synchronize()
    assert not got.isnan().any()
    assert close(got, reference(*args), dtype, k)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="needs a Hopper GPU")
def test_gpu_hopper_build_targets_sm_90a():
    """The CUTLASS kernel body exists only under sm_90a; the manifest asks for
    it, so the library's device code is sm_90a (cuobjdump lists it)."""
    import shutil
    import subprocess

    registry.get("gemm", device="cuda")
    library = next(path for what, path in registry.status("gemm", device="cuda").artifacts.items() if "kernel" in what)
    tool = shutil.which("cuobjdump")
    if tool is None:
        pytest.skip("no cuobjdump")
    listing = subprocess.run([tool, "--list-elf", library], capture_output=True, text=True).stdout
    assert "sm_90a" in listing, listing


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_opcheck_and_fullgraph_compile():
    registry.get("gemm", device="cuda")
    a = torch.randn(256, 128, device="cuda").bfloat16()
    b = torch.randn(128, 512, device="cuda").bfloat16()
    bias = torch.randn(512, device="cuda").bfloat16()
    torch.library.opcheck(torch.ops.gemm.gemm.default, (a, b, None, bias, 1.5, 0.0))
    compiled = torch.compile(lambda x, y, z: torch.ops.gemm.gemm(x, y, None, z, 1.5, 0.0).relu(), fullgraph=True)
    assert torch.equal(compiled(a, b, bias), torch.ops.gemm.gemm(a, b, None, bias, 1.5, 0.0).relu())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_a_config_built_for_bf16_alone_computes_and_f16_still_runs():
    """What registry.tune builds for a bf16 tune: a config with gemm_bf16.cu
    only (core/dtype_units.h). Its op computes; the plain get still has f16."""
    from registry import _core
    from registry import tuned
    from registry.resolve import find, resolve

    manifest = find("gemm")
    config = [("GEMM_CLUSTER_M", 1), ("GEMM_CLUSTER_N", 1), ("GEMM_PINGPONG", 0), ("GEMM_TILE_M", 128),
              ("GEMM_TILE_N", 128)]
    bf16_only = tuned.config_manifest(manifest, "cuda", config, "bfloat16")
    assert list(bf16_only.cuda.sources) == ["gemm_bf16.cu"]
    state = resolve("gemm", "cuda", False, lambda *_: None, bf16_only)
    gen = torch.Generator(device="cuda").manual_seed(3)
    m, k, n = 512, 256, 384
    for dtype, op in [(torch.bfloat16, state.ops["gemm"]), (torch.float16, registry.get("gemm", device="cuda"))]:
        a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        b = torch.randn(k, n, device="cuda", generator=gen).to(dtype)
        assert close(op(a, b), reference(a.cpu(), b.cpu()), dtype, k), dtype
    assert _core.config_label(bf16_only.config) != _core.config_label(manifest.config)


AOT_CHECK = """
import sys
import torch
import gemm_ops

a, b, c, bias, want = torch.load(sys.argv[1])
got = gemm_ops.gemm(a.cuda(), b.cuda(), c.cuda(), bias.cuda(), 0.5, 2.0)
assert torch.equal(got.cpu(), want), (got.cpu().float() - want.float()).abs().max()
torch.library.opcheck(torch.ops.gemm.gemm.default, (a.cuda(), b.cuda(), None, bias.cuda(), 1.5, 0.0))
assert "registry" not in sys.modules, "the package imported the JIT registry"
print("AOT-OK")
"""


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_the_aot_package_builds_the_cutlass_kernel_and_matches_the_jit_op_bit_for_bit(tmp_path):
    """python -m registry aot gemm: pip builds the CUTLASS library with nvcc
    (sm_90a on Hopper); installed without the registry, its op gives the JIT
    op's bits with the alpha/beta/bias epilogue."""
    from aot_install import pip_install, run_installed
    from registry.tools import aot

    gen = torch.Generator(device="cuda").manual_seed(7)
    a, b = (torch.randn(*s, device="cuda", generator=gen).bfloat16() for s in ((1000, 512), (512, 384)))
    c, bias = torch.randn(1000, 384, device="cuda", generator=gen).bfloat16(), torch.randn(384, device="cuda").bfloat16()
    want = registry.get("gemm", device="cuda")(a, b, c, bias, 0.5, 2.0).cpu()
    pip_install(aot.export_package("gemm", tmp_path / "pkg", backends=["cuda"]), tmp_path / "site")
    torch.save((a.cpu(), b.cpu(), c.cpu(), bias.cpu(), want), tmp_path / "case.pt")
    run_installed(tmp_path / "site", AOT_CHECK, str(tmp_path / "case.pt"), cwd=tmp_path)
