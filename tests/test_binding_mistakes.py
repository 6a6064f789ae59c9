"""What a new user gets wrong in a hand-written binding or a kernel's
sources, and what the registry then says: each message names the problem and
what to write instead, as a RegistryError; the CLI prints it without a
traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import registry
from registry.errors import BuildError, RegistryError

from conftest import CHECKOUT, KernelCopy
from test_pybind_kernel import BINDING

pytestmark = pytest.mark.usefixtures("cache_root")


def _pybind_copy(copy, binding: str):
    copy.path("axpy_pybind.cpp").write_text(binding)
    copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "pybind"\nbinding_source = "axpy_pybind.cpp"')
    copy.edit("kernel.toml", 'dtypes = ["float32", "float16", "bfloat16"]', 'dtypes = ["float32"]')
    return copy


def _error(copy, kind=RegistryError):
    with pytest.raises(kind) as caught:
        registry.get(copy.name, device="cpu")
    return caught.value


@pytest.mark.slow
def test_two_module_blocks_say_keep_exactly_one(axpy_copy):
    _pybind_copy(axpy_copy, BINDING + '\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m2) { m2.def("axpy2", &axpy); }\n')
    error = _error(axpy_copy, BuildError)
    assert "defines PYBIND11_MODULE more than once" in str(error), str(error)
    assert "keep exactly one PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)" in str(error), str(error)
    assert str(axpy_copy.path("axpy_pybind.cpp")) in str(error)


@pytest.mark.slow
def test_a_module_not_named_torch_extension_name_says_which_macro(axpy_copy):
    _pybind_copy(axpy_copy, BINDING.replace("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)", "PYBIND11_MODULE(axpy_ext, m)"))
    error = _error(axpy_copy, BuildError)
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)" in str(error), str(error)
    assert "axpy_ext" in str(error), str(error)


@pytest.mark.slow
def test_an_m_def_name_other_than_the_op_names_both(axpy_copy, tmp_path):
    _pybind_copy(axpy_copy, BINDING.replace('m.def("axpy", &axpy, "axpy")', 'm.def("my_axpy", &axpy, "axpy")'))
    error = _error(axpy_copy)
    assert isinstance(error, RegistryError) and not isinstance(error, BuildError)
    message = str(error)
    assert "op 'axpy'" in message and "my_axpy" in message and 'm.def("axpy"' in message, message

    # The command line says the same, as one line and no traceback.
    import os

    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    done = subprocess.run([sys.executable, "-m", "registry", "build", axpy_copy.name, "--device", "cpu"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: "), done.stderr
    assert "my_axpy" in done.stderr


@pytest.mark.slow
def test_raw_pointer_arguments_say_take_tensors(axpy_copy):
    binding = BINDING.replace(
        "torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) {",
        "void axpy_raw(float* out, const float* x, const float* y, float alpha) { out[0] = alpha * x[0] + y[0]; }\n"
        "torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) {")
    binding = binding.replace('m.def("axpy", &axpy, "axpy")', 'm.def("axpy", &axpy_raw, "axpy")')
    _pybind_copy(axpy_copy, binding)
    op = registry.get(axpy_copy.name, device="cpu")
    with pytest.raises(TypeError) as caught:
        op(torch.randn(4), torch.randn(4), 1.0)
    assert isinstance(caught.value, RegistryError), type(caught.value).__mro__
    message = str(caught.value)
    assert "take torch::Tensor" in message and "data_ptr" in message, message


def test_one_symbol_defined_in_two_sources_names_it_and_both_files(axpy_copy):
    helper = "float axpy_twice(float v) { return 2 * v; }\n"
    axpy_copy.path("extra.cpp").write_text(helper)
    axpy_copy.path("more.cpp").write_text(helper)
    axpy_copy.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["axpy_cpu.cpp", "extra.cpp", "more.cpp"]')
    error = _error(axpy_copy, BuildError)
    message = str(error)
    assert "axpy_twice(float)" in message, message
    assert "extra.cpp" in message and "more.cpp" in message, message
    assert "defined in two sources" in message and "inline" in message, message


@pytest.mark.parametrize("call, builtin", [
    (lambda op: op(torch.randn(4)[::2], torch.randn(2), 1.0), RuntimeError),      # not contiguous
    (lambda op: op(torch.randn(4), torch.randn(4).double(), 1.0), RuntimeError),  # wrong dtype
    (lambda op: op(torch.randn(4), torch.randn(5), 1.0), RuntimeError),           # wrong shape
    (lambda op: op(torch.randn(4), torch.randn(4, device="meta"), 1.0), RuntimeError),  # another device
], ids=["contiguity", "dtype", "shape", "device"])
def test_input_checks_raise_registry_errors_keeping_the_builtin(call, builtin):
    op = registry.get("axpy", device="cpu")
    with pytest.raises(builtin) as caught:
        call(op)
    assert isinstance(caught.value, RegistryError), type(caught.value).__mro__
    assert str(caught.value).startswith(("axpy.axpy: ", "axpy: argument ")), str(caught.value)
