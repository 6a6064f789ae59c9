"""Fakes take arguments the way the schema does: defaulted ones may be left
out, keyword-only ones come by keyword. Every library kernel (exposed as
torch.ops.<kernel>.<op> through binding = "torch-library") and a kernel with
keyword-only arguments go through FakeTensorMode, torch.library.opcheck and
torch.compile(fullgraph=True) with their defaults left out, passed
positionally and passed by keyword."""
from __future__ import annotations

import shutil

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import registry
from conftest import CHECKOUT
from kernel_contract import make_args, manifests

pytestmark = pytest.mark.usefixtures("cache_root")

ROWSTAT_TOML = '''format = 1
description = "y[r] = sum(x[r, :] * w) * scale + offset"
binding = "torch-library"

[cpu]
sources = ["rowstat_cpu.cpp"]

[[op]]
signature = "rowstat(Tensor x, Tensor? w, float scale=2.0, *, int offset=0) -> Tensor y"
dtypes = ["float32"]
same_shape = []
outputs = { y = "float32[x.shape[:-1]]" }
sweep = { x = "[rows, cols]", w = "[cols]" }
'''

ROWSTAT_CPU = r'''#include "kreg/cpu.h"
KREG_API const char* rowstat_f32(kreg_tensor y, kreg_tensor x, kreg_tensor w, float scale, int64_t offset, void*) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  const float* xs = static_cast<const float*>(x.data);
  const float* ws = static_cast<const float*>(w.data);
  float* ys = static_cast<float*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;  // float64 sums: within float32 tolerance of the reference at every sweep size
    for (int64_t c = 0; c < cols; ++c) s += double(xs[r * cols + c]) * (ws ? ws[c] : 1.0f);
    ys[r] = float(s * scale + double(offset));
  }
  return nullptr;
}
'''


def _library_copies():
    """Each library kernel with a CPU build, as (manifest, name of a copy
    defined as torch.ops.<copy>)."""
    return [m for m in manifests() if m.cpu.present]


def _changed(value):
    """A value other than the default, so passing it is seen in the result."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return value


def _call_forms(op, args):
    """(label, positional args, keyword args) for one op: its defaults left
    out, passed positionally (up to the '*') and passed by keyword."""
    sig = op.signature.args
    required = [(a, v) for a, v in zip(sig, args) if not a.has_default]
    defaulted = [(a, _changed(v) if a.type_name != "Tensor" else v) for a, v in zip(sig, args) if a.has_default]
    forms = []
    # Left out: the positional arguments without a default, the keyword-only ones without one by keyword.
    forms.append(("left out", [v for a, v in required if not a.keyword_only],
                  {a.name: v for a, v in required if a.keyword_only}))
    if defaulted:
        positional = [v for a, v in zip(sig, args) if not a.keyword_only and not a.has_default]
        positional += [v for a, v in defaulted if not a.keyword_only]
        forms.append(("positional", positional,
                      {a.name: v for a, v in list(required) + defaulted if a.keyword_only}))
        forms.append(("by keyword", [v for a, v in required if not a.keyword_only],
                      {a.name: v for a, v in list(required) + defaulted if a.keyword_only or a.has_default}))
    return forms


def _expose(kernels_root, manifest) -> str:
    """A copy of a library kernel with binding = "torch-library", under its own name."""
    name = f"lib_{manifest.name}"
    folder = kernels_root / name
    if not folder.exists():
        shutil.copytree(CHECKOUT / "kernels" / manifest.name, folder)
        toml = folder / "kernel.toml"
        text = toml.read_text()
        if 'binding = "torch-library"' not in text:
            text = text.replace("format = 1", 'format = 1\nbinding = "torch-library"', 1)
        toml.write_text(text)
    registry.get(name, device="cpu")
    return name


@pytest.fixture(scope="module")
def rowstat(kernels_root) -> str:
    folder = kernels_root / "rowstat_kw"
    folder.mkdir(exist_ok=True)
    (folder / "kernel.toml").write_text(ROWSTAT_TOML)
    (folder / "rowstat_cpu.cpp").write_text(ROWSTAT_CPU)
    registry.get("rowstat_kw", device="cpu")
    return "rowstat_kw"


def _fresh(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _check_every_path(torch_op, op, args):
    mutates = any(a.mutated for a in op.signature.args)
    for label, positional, keywords in _call_forms(op, args):
        eager = torch_op(*_fresh(positional), **{k: (v.clone() if isinstance(v, torch.Tensor) else v)
                                                  for k, v in keywords.items()})
        with FakeTensorMode() as mode:
            fake_pos = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in positional]
            fake_kw = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in keywords.items()}
            faked = torch_op(*fake_pos, **fake_kw)
        for got, want in zip(_as_tuple(faked), _as_tuple(eager)):
            assert got.shape == want.shape and got.dtype == want.dtype, label
        torch.library.opcheck(torch_op.default, tuple(_fresh(positional)), dict(keywords),
                              test_utils=("test_schema", "test_faketensor"))
        torch._dynamo.reset()
        compiled = torch.compile(lambda *a, **k: torch_op(*a, **k), fullgraph=True)
        got = compiled(*_fresh(positional), **keywords)
        if not mutates:
            for g, w in zip(_as_tuple(got), _as_tuple(eager)):
                torch.testing.assert_close(g, w, msg=lambda m: f"{op.name}, defaults {label}: {m}")


def _as_tuple(value):
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("manifest", _library_copies(), ids=lambda m: m.name)
def test_every_library_kernel_through_fakes_opcheck_and_compile(kernels_root, manifest):
    name = _expose(kernels_root, manifest)
    for op in manifest.ops:
        dtype = torch.float32 if "float32" in op.dtypes else getattr(torch, op.dtypes[0])  # gemm: 16-bit only
        args = make_args(op, 24, dtype, "cpu", torch.Generator().manual_seed(0))
        _check_every_path(getattr(getattr(torch.ops, name), op.name), op, args)


def test_keyword_only_kernel_through_fakes_opcheck_and_compile(rowstat):
    x, w = torch.randn(6, 24), torch.randn(24)
    op = torch.ops.rowstat_kw.rowstat
    spec = registry.get(rowstat, device="cpu")._spec
    _check_every_path(op, spec, [x, w, 2.0, 0])
    torch.testing.assert_close(op(x, w, offset=3), (x * w).sum(-1) * 2.0 + 3)


def test_keyword_only_kernel_through_its_handle_under_compile(rowstat):
    handle = registry.get(rowstat, device="cpu")
    x, w = torch.randn(6, 24), torch.randn(24)
    compiled = torch.compile(lambda x, w: handle(x, w, offset=4) + handle(x, None), fullgraph=True)
    torch.testing.assert_close(compiled(x, w), handle(x, w, offset=4) + handle(x, None))
    with FakeTensorMode() as mode:
        assert handle(mode.from_tensor(x), None, 1.5, offset=2).shape == (6,)


def test_errors_of_torchs_own_ops_keep_their_type_and_message():
    # Importing the core registers its exception translator. It must translate
    # the core's own calls only: taking over every call bound with pybind11
    # made a fake's TypeError under FakeTensorMode an empty CoreError, and an
    # aten error a CoreError.
    from registry import _core

    _core.parse_signature("f(Tensor x) -> Tensor")  # the core is loaded
    library = torch.library.Library("kreg_test_raises", "DEF")
    library.define("boom(Tensor x) -> Tensor")
    library.impl("boom", lambda x: x.clone(), "CPU")

    def fake(x):
        raise TypeError("the fake's own message")

    torch.library.register_fake("kreg_test_raises::boom", lib=library)(fake)
    with pytest.raises(TypeError, match="the fake's own message"):
        with FakeTensorMode() as mode:
            torch.ops.kreg_test_raises.boom(mode.from_tensor(torch.zeros(2)))
    with pytest.raises(RuntimeError, match="is invalid for input of size 2") as caught:
        torch.ops.aten.reshape(torch.zeros(2), [3])
    assert not isinstance(caught.value, registry.errors.RegistryError), type(caught.value).__mro__
