"""The kernel library (kernels/) through what it exercises: several outputs of
different dtypes, declared shapes, optional and keyword arguments, in-place
ops, autograd through a named backward, torch.compile fakes, torch.library
opcheck, sweeps with baselines, and CUDA sources that compile."""
from __future__ import annotations

import os
import shutil
import subprocess
import types
from pathlib import Path

import pytest
import torch

import registry
from registry import _core, header_packages
from registry.op import Op

from conftest import CHECKOUT, KernelCopy
from kernel_contract import manifests, op_handle

pytestmark = pytest.mark.usefixtures("cache_root")  # the session's private cache, not the checkout's


def _get(kernel: str, op: str | None = None):
    handle = registry.get(kernel, device="cpu")
    return getattr(handle, op) if op else handle


# ---- signatures at call time -------------------------------------------------

def test_defaults_optional_tensors_and_keywords():
    softmax = _get("softmax")
    x = torch.randn(4, 33)
    assert torch.equal(softmax(x), softmax(x, 1.0))
    assert torch.allclose(softmax(x, temperature=2.0), torch.softmax(x / 2.0, -1), atol=1e-6)
    layernorm = _get("layernorm")
    w, b = torch.randn(33), torch.randn(33)
    y_none, _, _ = layernorm(x, w, None)
    y_bias, mean, rstd = layernorm(x, w, b, eps=1e-5)
    assert torch.allclose(y_bias - y_none, b.expand_as(x), atol=1e-5)
    ref = torch.nn.functional.layer_norm(x, (33,), w, b)
    assert torch.allclose(y_bias, ref, atol=1e-5)
    assert mean.dtype == torch.float32 and mean.shape == (4,) and rstd.shape == (4,)
    with pytest.raises(TypeError, match="has no argument 'epsilon'"):
        layernorm(x, w, b, epsilon=1.0)


def test_keyword_only_arguments_must_be_passed_by_keyword():
    spec = types.SimpleNamespace(signature=_core.parse_signature("f(Tensor x, *, float a=2.0, int k) -> Tensor"))
    op = Op("k", "f", spec.signature.canonical(), ["x", "a", "k"], spec)
    op._fn, op._table, op._address = (lambda *args: args[:-1]), object(), 0
    x = torch.zeros(1)
    assert op(x, k=3) == (x, 2.0, 3)
    assert op(x, a=1.0, k=4) == (x, 1.0, 4)
    with pytest.raises(TypeError, match="takes 1 positional arguments, got 3; pass the ones after"):
        op(x, 1.0, 4)
    with pytest.raises(TypeError, match="missing k"):
        op(x)


def test_outputs_of_different_dtypes_and_shapes_from_two_inputs():
    x = torch.randn(5, 7, dtype=torch.bfloat16)
    values, indices = _get("rowmax")(x)
    assert values.dtype == torch.bfloat16 and indices.dtype == torch.int64 and indices.shape == (5,)
    assert torch.equal(indices, x.float().argmax(-1))
    q, scale = _get("quantize")(x)
    assert q.dtype == torch.int8 and q.shape == (5, 7) and scale.dtype == torch.float32 and scale.shape == (5,)
    assert torch.allclose(q.float() * scale[:, None], x.float(), atol=float(scale.max()))
    c = _get("matmul")(torch.randn(5, 7), torch.randn(7, 3))
    assert c.shape == (5, 3)
    with pytest.raises(RuntimeError, match="a's columns must equal b's rows"):
        _get("matmul")(torch.randn(5, 7), torch.randn(6, 3))


def test_in_place_op_writes_its_argument_and_returns_nothing():
    scale_ = _get("scale")
    x = torch.randn(1000)
    before = x.clone()
    assert scale_(x, 2.5) is None
    assert torch.allclose(x, before * 2.5)
    with pytest.raises(RuntimeError, match="writes its Tensor\\(a!\\) argument in place"):
        scale_(torch.randn(3, requires_grad=True), 2.0)


# ---- autograd ----------------------------------------------------------------

def test_loss_backward_gives_torchs_gradients():
    rmsnorm = _get("rmsnorm", "rmsnorm")
    x = torch.randn(6, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    (rmsnorm(x, w) * torch.randn(6, 64)).sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    g = torch.randn(6, 64)
    torch.manual_seed(0)
    out = rmsnorm(x, w)
    assert out.grad_fn is not None
    x.grad = w.grad = None
    (out * g).sum().backward()
    (torch.nn.functional.rms_norm(x2, (64,), w2, 1e-6) * g).sum().backward()
    assert torch.allclose(x.grad, x2.grad, atol=1e-5) and torch.allclose(w.grad, w2.grad, atol=1e-4)


@pytest.mark.parametrize("manifest,op", [(m, op) for m in manifests() for op in m.ops if op.backward],
                         ids=lambda v: getattr(v, "name", v))
def test_gradcheck_in_float64_on_the_cpu(manifest, op):
    assert "float64" in op.dtypes, f"{manifest.name}.{op.name} has a backward but no float64 build to gradcheck"
    from kernel_contract import make_args

    handle = op_handle(manifest, op, "cpu")
    args = make_args(op, 17, torch.float64, "cpu", torch.Generator().manual_seed(0))
    args = [a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    assert torch.autograd.gradcheck(lambda *t: handle(*t), tuple(args))


def test_an_op_without_backward_raises_when_backward_reaches_it():
    x = torch.randn(3, 8, requires_grad=True)
    y = _get("softmax")(x)  # runs: only backward() needs the gradient
    with pytest.raises(RuntimeError, match="softmax.softmax has no backward.*backward = \"softmax_backward\""):
        y.sum().backward()


# ---- torch.compile and torch.library ---------------------------------------

def test_fakes_allocate_from_the_declarations_under_torch_compile():
    layernorm = _get("layernorm")

    def f(x, w):
        y, mean, rstd = layernorm(x, w, None)
        return y * 2, mean + rstd

    x, w = torch.randn(4, 16), torch.randn(16)
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(x, w), f(x, w)):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert torch.allclose(got, want)


def test_opcheck_on_torch_library_ops():
    _get("softmax")
    x = torch.randn(5, 33)
    torch.library.opcheck(torch.ops.softmax.softmax.default, (x, 0.5),
                          test_utils=("test_schema", "test_faketensor"))
    assert torch.allclose(torch.ops.softmax.softmax(x), torch.softmax(x, -1), atol=1e-6)  # the default


# ---- sweeps --------------------------------------------------------------------

def test_sweep_maps_sizes_onto_shapes_and_shows_the_baseline():
    result = registry.sweep("layernorm", sizes=[1, 17, 1 << 12], device="cpu", repeats=2)
    table = result.table
    assert result.passed, table.to_string()
    assert set(table["shape"]) >= {"x[17, 33] weight[33] bias[33]", "x[1, 1] weight[1] bias[1]"}
    assert (table["baseline_ms"] > 0).all() and (table["speedup"] > 0).all()


def test_one_failing_row_is_marked_and_the_sweep_goes_on(kernels_root):
    copy = KernelCopy(kernels_root, "softmax", "softmax_failing_row")
    copy.edit("kernel.toml", 'binding = "torch-library"\n', "")  # torch.ops.softmax belongs to the checkout's
    copy.edit("softmax_cpu.cpp", "const T* xs = static_cast<const T*>(x.data);", "if (cols == 33) return \"no rows of 33\";\n  const T* xs = static_cast<const T*>(x.data);")
    result = registry.sweep(copy.name, sizes=[1, 17, 4096], dtypes=["float32"], device="cpu", repeats=1)
    table = result.table.set_index("n")
    assert table.loc[17, "passed"] is False or table.loc[17, "passed"] == False  # noqa: E712
    assert "no rows of 33" in table.loc[17, "note"]
    assert table.loc[1, "passed"] and table.loc[4096, "passed"]


def test_an_op_handle_can_be_swept_with_a_reference_function(axpy_copy):
    op = registry.get(axpy_copy.name, device="cpu")
    result = registry.sweep(op, sizes=[17], dtypes=["float32"], repeats=1,
                            reference=lambda x, y, alpha: alpha * x + y)
    assert result.passed
    wrong = registry.sweep(op, sizes=[17], dtypes=["float32"], repeats=1, reference=lambda x, y, alpha: x + y)
    assert not wrong.passed


# ---- CUDA sources ------------------------------------------------------------

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize("manifest", [m for m in manifests() if m.cuda.present], ids=lambda m: m.name)
def test_every_cuda_source_compiles_against_its_generated_prototypes(manifest, tmp_path):
    header = tmp_path / "launchers.h"
    header.write_text(_core.generate_launcher_header(manifest.name, list(manifest.ops)))
    include = CHECKOUT / "registry" / "include"
    packages = [d for package in header_packages.resolve(manifest) for d in package.include_dirs]
    arch = "sm_90a" if manifest.cuda.arch_specific else "sm_90"
    # The manifest's flags nvcc needs to parse the code (CUTLASS: --expt-relaxed-constexpr), not its -O levels.
    parsing = [f for f in manifest.cuda.cflags if f.startswith(("--expt", "-std=", "-D"))]
    for source in manifest.cuda.sources:
        command = [NVCC, f"-arch={arch}", "-std=c++17", *parsing, "-c", "-include", str(header), "-I", str(include),
                   "-I", manifest.dir, *[f"-I{Path(manifest.dir) / d}" for d in manifest.include_dirs],
                   *[f"-I{d}" for d in packages],
                   "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                   "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                   str(Path(manifest.dir) / source), "-o", str(tmp_path / "out.o")]
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, f"{source}:\n{done.stderr[-3000:]}"
