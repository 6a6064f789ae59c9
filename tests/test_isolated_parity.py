"""An isolated op gives bit-identical results to the normal op, through the
same binding: the library's CPU kernels in each dtype (declared outputs,
several returns, in place, Tensor?), defaults, keyword-only arguments,
non-contiguous inputs, autograd, argument errors, and hot reload."""
from __future__ import annotations

import os
import time

import pytest
import torch

import registry
from registry.notebook.checks import make_args
from registry.resolve import find

LIBRARY = ["axpy", "scale", "softmax", "rmsnorm", "layernorm", "rowmax", "quantize", "matmul"]


def _bits(value):
    if isinstance(value, tuple):
        return tuple(_bits(v) for v in value)
    if value is None:
        return None
    return (value.dtype, tuple(value.shape), value.contiguous().view(torch.uint8).flatten().tolist())


def _ops(handle):
    return handle.ops if hasattr(handle, "ops") else {handle.name: handle}


@pytest.mark.parametrize("kernel", LIBRARY)
def test_library_kernel_bit_identical(kernel, cache_root):
    from registry import dtypes

    manifest = find(kernel)
    normal = _ops(registry.get(kernel, device="cpu"))
    isolated = _ops(registry.get(kernel, device="cpu", isolate=True))
    assert set(normal) == set(isolated)
    for spec in manifest.ops:
        for dtype_name in spec.dtypes:
            for n in (1, 17, 4096, 1 << 16):  # 2^16: outputs from the shared output pool
                generator = torch.Generator().manual_seed(n)
                args = make_args(spec, n, dtypes.torch_dtype(dtype_name), "cpu", generator, {})
                mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                theirs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                expected = normal[spec.name](*theirs)
                got = isolated[spec.name](*mine)
                where = f"{kernel}.{spec.name} {dtype_name} n={n}"
                assert _bits(got) == _bits(expected), where
                assert [_bits(a) if isinstance(a, torch.Tensor) else a for a in mine] == \
                       [_bits(a) if isinstance(a, torch.Tensor) else a for a in theirs], f"{where}: arguments"


KW_TOML = """format = 1
description = "keyword-only, Tensor? and defaults"

[cpu]
sources = ["kw.cpp"]

[[op]]
signature = "{name}(Tensor x, Tensor? bias=None, *, float scale=2.0, int shift=1) -> Tensor"
dtypes = ["float32", "float64"]
"""

KW_SOURCE = """#include "kreg/abi.h"
template <typename T>
static const char* run(kreg_tensor out, kreg_tensor x, kreg_tensor bias, double scale, int64_t shift) {{
  const T* xs = static_cast<const T*>(x.data);
  const T* bs = static_cast<const T*>(bias.data);
  T* os = static_cast<T*>(out.data);
  for (int64_t i = 0; i < out.numel; ++i) os[i] = xs[i] * T(scale) + (bs ? bs[i] : T(0)) + T(shift) + T({k});
  return shift == 99 ? "shift 99 is refused" : nullptr;
}}
KREG_API const char* {name}_f32(kreg_tensor out, kreg_tensor x, kreg_tensor bias, float scale, int64_t shift, void*) {{
  return run<float>(out, x, bias, scale, shift);
}}
KREG_API const char* {name}_f64(kreg_tensor out, kreg_tensor x, kreg_tensor bias, double scale, int64_t shift, void*) {{
  return run<double>(out, x, bias, scale, shift);
}}
"""


def _write_kw(root, name: str, k: int) -> None:
    folder = root / name
    folder.mkdir(exist_ok=True)
    (folder / "kernel.toml").write_text(KW_TOML.format(name=name))
    source = folder / "kw.cpp"
    source.write_text(KW_SOURCE.format(name=name, k=k))
    os.utime(source, ns=(time.time_ns(), time.time_ns()))


def test_defaults_keyword_only_optional_tensor_errors_and_hot_reload(kernels_root, cache_root):
    name = "iso_kw"
    _write_kw(kernels_root, name, 0)
    normal = registry.get(name, device="cpu")
    isolated = registry.get(name, device="cpu", isolate=True)
    x = torch.randn(33, dtype=torch.float64)
    bias = torch.randn(33, dtype=torch.float64)
    for args, kwargs in [((x,), {}), ((x, bias), {}), ((x,), {"scale": 0.5}), ((x, None), {"shift": -3}),
                         ((x[::2].clone(),), {"scale": 3.0, "shift": 2})]:
        assert _bits(isolated(*args, **kwargs)) == _bits(normal(*args, **kwargs)), (args, kwargs)
    view = torch.randn(67, dtype=torch.float64)[1:34]  # at an offset in its storage
    assert _bits(isolated(view)) == _bits(normal(view))
    strided = x[::2]  # the binding refuses it, in the same words
    for bad in [lambda op: op(x, bias, 2.0), lambda op: op(x, nosuch=1), lambda op: op("x"),
                lambda op: op(strided)]:
        with pytest.raises(Exception) as mine:
            bad(isolated)
        with pytest.raises(Exception) as theirs:
            bad(normal)
        assert type(mine.value) is type(theirs.value) and str(mine.value) == str(theirs.value)
    with pytest.raises(RuntimeError) as launcher_error:  # the launcher's own error, as the normal op says it
        isolated(x, shift=99)
    with pytest.raises(RuntimeError) as normal_error:
        normal(x, shift=99)
    assert "shift 99 is refused" in str(launcher_error.value)
    assert str(launcher_error.value) == str(normal_error.value)
    assert not isinstance(launcher_error.value, registry.KernelFault)
    # An edit reaches the isolated handle the notebook holds.
    _write_kw(kernels_root, name, 7)
    registry.get(name, device="cpu")
    assert _bits(isolated(x)) == _bits(normal(x))
    assert torch.equal(isolated(x), x * 2.0 + 1 + 7)


def test_autograd_through_the_isolated_backward(cache_root):
    normal = registry.get("rmsnorm", device="cpu")
    isolated = registry.get("rmsnorm", device="cpu", isolate=True)
    x = torch.randn(8, 64, dtype=torch.float64)
    w = torch.randn(64, dtype=torch.float64)
    grads = []
    for handle in (normal, isolated):
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = handle.rmsnorm(xs, ws)
        y.sum().backward()
        grads.append((_bits(y.detach()), _bits(xs.grad), _bits(ws.grad)))
    assert grads[0] == grads[1]


def test_status_says_what_is_staged(cache_root):
    op = registry.get("axpy", device="cpu", isolate=True)
    op(torch.ones(3), torch.ones(3), 1.0)
    text = str(registry.status("axpy", device="cpu"))
    assert "isolated worker (plain)" in text and "staged" in text and "shared memory" in text
