"""A kernel's torch.ops names: `namespace` in the manifest, clashes with other
kernels and other code as RegistryErrors before anything is registered,
hand-written TORCH_LIBRARY code refused before it is built, and torch's out=
convention (an argument named out) end to end. On the CPU."""
from __future__ import annotations

import itertools

import pytest
import torch

import registry
from conftest import KernelCopy

_counter = itertools.count()

MYADD_TOML = """format = 1
binding = "torch-library"
namespace = "{namespace}"

[cpu]
sources = ["myadd.cpp"]

[[op]]
signature = "myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()"
"""

MYADD_CPP = r"""#include "kreg/cpu.h"
KREG_API const char* myadd_out_f32(kreg_tensor a, kreg_tensor b, kreg_tensor out, void*) {
  const float* x = static_cast<const float*>(a.data);
  const float* y = static_cast<const float*>(b.data);
  float* z = static_cast<float*>(out.data);
  for (int64_t i = 0; i < out.numel; ++i) z[i] = x[i] + y[i];
  return nullptr;
}
"""

TORCH_LIBRARY_CPP = r"""#include <torch/extension.h>
at::Tensor axpy_cpu(const at::Tensor& x, const at::Tensor& y, double alpha) {{ return alpha * x + y; }}
TORCH_LIBRARY({namespace}, m) {{ m.def("axpy(Tensor x, Tensor y, float alpha) -> Tensor"); }}
TORCH_LIBRARY_IMPL({namespace}, CPU, m) {{ m.impl("axpy", &axpy_cpu); }}
"""


def _unique(stem: str) -> str:
    return f"{stem}_t{next(_counter)}"


def _library_axpy(kernels_root, namespace: str) -> KernelCopy:
    copy = KernelCopy(kernels_root, "axpy", _unique("lib_axpy"))
    copy.edit("kernel.toml", "format = 1", f'format = 1\nbinding = "torch-library"\nnamespace = "{namespace}"')
    return copy


def _assert_torch_ops_axpy(namespace: str, alpha: float) -> None:
    """torch.ops.<namespace>.axpy computes alpha * x + y (the unedited axpy)."""
    x, y = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(getattr(torch.ops, namespace).axpy(x, y, alpha), alpha * x + y)


def test_namespace_key_keeps_the_labs_torch_ops_name(kernels_root):
    namespace = _unique("lab")
    copy = _library_axpy(kernels_root, namespace)
    registry.get(copy.name, device="cpu")
    _assert_torch_ops_axpy(namespace, 2.0)


def test_an_op_another_kernel_holds_is_a_registry_error_and_the_first_keeps_it(kernels_root):
    namespace = _unique("shared")
    first = _library_axpy(kernels_root, namespace)
    registry.get(first.name, device="cpu")
    second = _library_axpy(kernels_root, namespace)
    second.edit("axpy_cpu.cpp", "alpha *", "2.0f * alpha *")  # a different kernel: results tell them apart
    with pytest.raises(registry.RegistryError) as info:
        registry.get(second.name, device="cpu")
    message = str(info.value)
    assert f"torch.ops.{namespace}.axpy is already defined by kernel {first.name!r}" in message
    assert "namespace = " in message
    _assert_torch_ops_axpy(namespace, 3.0)  # still the first's: the second doubles alpha


def test_an_op_other_code_defined_is_a_registry_error_other_names_share_the_namespace(kernels_root):
    namespace = _unique("ext")
    library = torch.library.Library(namespace, "DEF")
    library.define("axpy(Tensor x, Tensor y, float alpha) -> Tensor")
    clashing = _library_axpy(kernels_root, namespace)
    with pytest.raises(registry.RegistryError) as info:
        registry.get(clashing.name, device="cpu")
    assert type(info.value) is not RuntimeError
    assert "other code in this process" in str(info.value)

    other = _unique("ext")
    other_library = torch.library.Library(other, "DEF")
    other_library.define("scale(Tensor x) -> Tensor")
    sharing = _library_axpy(kernels_root, other)
    registry.get(sharing.name, device="cpu")
    _assert_torch_ops_axpy(other, 0.5)


def test_hand_written_torch_library_is_refused_before_it_registers_anything(kernels_root):
    namespace = _unique("handwritten")
    copy = KernelCopy(kernels_root, "axpy", _unique("pattern_b"))
    copy.path("kernel_ops.cpp").write_text(TORCH_LIBRARY_CPP.format(namespace=namespace))
    copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "pybind"\nbinding_source = "kernel_ops.cpp"')
    with pytest.raises(registry.RegistryError) as info:
        registry.get(copy.name, device="cpu")
    message = str(info.value)
    assert 'binding = "torch-library"' in message and f'namespace = "{namespace}"' in message
    assert "kernel_ops.cpp:3" in message
    assert torch._C._jit_get_schemas_for_operator(f"{namespace}::axpy") == []


def test_out_is_an_argument_name_end_to_end(kernels_root):
    namespace = _unique("myops")
    folder = kernels_root / _unique("myadd")
    folder.mkdir()
    (folder / "kernel.toml").write_text(MYADD_TOML.format(namespace=namespace))
    (folder / "myadd.cpp").write_text(MYADD_CPP)
    op = registry.get(folder.name, device="cpu")
    a, b = torch.randn(32), torch.randn(32)
    out = torch.empty(32)
    assert op(a, b, out) is None
    torch.testing.assert_close(out, a + b)
    out.zero_()
    op(a, b, out=out)
    torch.testing.assert_close(out, a + b)
    out.zero_()
    getattr(torch.ops, namespace).myadd_out(a, b, out=out)
    torch.testing.assert_close(out, a + b)
