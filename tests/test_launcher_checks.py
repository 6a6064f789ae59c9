"""Launchers are checked against their signature when they compile: the
registry force-includes prototypes generated from the manifest, so a launcher
that disagrees is a build error naming the op, the argument and both types,
and a launcher missing for a listed dtype fails the build too."""
from __future__ import annotations

import pytest

import registry
from registry.errors import BuildError


def _build_error(copy) -> BuildError:
    with pytest.raises(BuildError) as caught:
        registry.get(copy.name, device="cpu")
    return caught.value


def test_wrong_scalar_type_is_a_compile_error_naming_op_argument_and_types(axpy_copy):
    axpy_copy.edit("axpy.h", "float alpha, [[maybe_unused]]", "double alpha, [[maybe_unused]]")
    error = _build_error(axpy_copy)
    assert "op axpy, launcher axpy_f32: parameter 4 (float alpha) must be float but the launcher takes double" \
        in str(error), str(error)


def test_wrong_pointer_constness_is_a_compile_error(axpy_copy):
    axpy_copy.edit("axpy.h", "[[maybe_unused]] void* stream", "[[maybe_unused]] const void* stream")
    error = _build_error(axpy_copy)
    assert "parameter 5 (the stream) must be void* but the launcher takes const void*" in str(error), str(error)


def test_pybind_style_pointer_launcher_is_a_compile_error_with_the_count(axpy_copy):
    # What a new user writes: raw pointers, no output view, no stream.
    axpy_copy.edit("axpy_cpu.cpp", "AXPY_LAUNCHER(f32) { return axpy_cpu<float>(out, x, y, alpha); }",
                   "KREG_API const char* axpy_f32(float* out, const float* x, const float* y, float alpha) "
                   "{ out[0] = x[0] + alpha * y[0]; return nullptr; }")
    axpy_copy.edit("axpy.h", "AXPY_LAUNCHER(f32);\n", "")
    error = _build_error(axpy_copy)
    assert "op axpy, launcher axpy_f32: it takes 4 parameters but the signature axpy(Tensor x, Tensor y, " \
           "float alpha) -> Tensor needs (kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void* stream)" \
        in str(error), str(error)


def test_missing_launcher_for_a_listed_dtype_fails_the_build(axpy_copy, compiles):
    axpy_copy.edit("axpy_cpu.cpp", "AXPY_LAUNCHER(bf16) { return axpy_cpu<kreg::bfloat16>(out, x, y, alpha); }", "")
    error = _build_error(axpy_copy)
    assert f"kernel {axpy_copy.name}, op axpy: no launcher for bfloat16; define KREG_API const char* " \
           "axpy_bf16(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void* stream)" in str(error)
    assert "remove bfloat16 from the op's dtypes in kernel.toml" in str(error)
    assert (axpy_copy.name, "kernel-lib") in compiles(axpy_copy.name)  # it was the build that failed
