"""A function declared and called but defined nowhere fails the build at link
time, with the symbol demangled and the line that declares it; not at the
first dlopen with a message about a staging folder that is gone."""
from __future__ import annotations

import pytest
import torch

import registry
from registry.builder import link_errors

HELPER_H = "#pragma once\n\n// Scales one element (defined in helper.cpp, when it exists).\nfloat helper(float a, float b);\n"


def _call_undefined_helper(copy) -> None:
    copy.path("include/axpy/helper.h").write_text(HELPER_H)
    copy.edit("axpy_cpu.cpp", '#include "axpy.h"', '#include "axpy.h"\n#include "axpy/helper.h"')
    copy.edit("axpy_cpu.cpp", "axpy_element(alpha, kreg::to_float(xs[i]), kreg::to_float(ys[i]))",
              "helper(alpha, kreg::to_float(xs[i])) + kreg::to_float(ys[i])")


def test_undefined_symbol_is_named_at_its_declaration(axpy_copy):
    _call_undefined_helper(axpy_copy)
    with pytest.raises(registry.BuildError) as info:
        registry.get(axpy_copy.name, device="cpu")
    first = info.value.first
    assert first is not None, str(info.value)
    assert first.file == str(axpy_copy.path("include/axpy/helper.h")) and first.line == 4, first
    assert "undefined symbol `helper(float, float)`" in first.message
    assert "[cpu].sources" in first.message
    assert "/v1/tmp/" not in str(info.value), "names a staging folder"

    # Defining it is the fix, and -z defs lets an ordinary library link.
    axpy_copy.path("helper.cpp").write_text('#include "axpy/helper.h"\nfloat helper(float a, float b) { return a * b; }\n')
    axpy_copy.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["axpy_cpu.cpp", "helper.cpp"]')
    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(registry.get(axpy_copy.name, device="cpu")(x, y, 1.5), 1.5 * x + y)


def test_symbols_from_linkers_and_dlopen_are_demangled():
    assert link_errors.undefined_symbols("/x/k.so: undefined symbol: _Z6helperff") == ["helper(float, float)"]
    assert link_errors.undefined_symbols(
        "a.o: in function `f':\na.cpp:(.text+0x1): undefined reference to `ns::g<int>(int)'\n"
        "ld.lld: error: undefined symbol: h(double)\n>>> referenced by b.cpp") == ["ns::g<int>(int)", "h(double)"]
    assert link_errors.base_name("ns::g<std::vector<int> >(int) const") == "g"
    # ptxas (nvcc, NVRTC, nvJitLink's one-thread link), and nvJitLink when its link is split over threads
    assert link_errors.device_symbols("ptxas fatal   : Unresolved extern function '_Z6helperff'") == ["helper(float, float)"]
    assert link_errors.device_symbols("error   : Undefined reference to '_Z6helperff' in 'ltoPtx'") == [
        "helper(float, float)"]


def test_declaration_search_skips_calls(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("float x = helper(1, 2);\nreturn helper(a, b);\nfoo(helper(a));\n"
                      "// float helper(float, float);\nstatic inline float* helper(float a,\n")
    assert link_errors.find_declaration("helper(float, float)", [str(source)]) == (str(source), 5)


def test_definition_with_another_signature_is_named_beside_the_declaration(axpy_copy):
    # The declaration the call sees is in axpy_cpu.cpp; helper.cpp, listed first,
    # defines a helper whose first parameter is a double: a different function.
    axpy_copy.edit("axpy_cpu.cpp", "namespace {", "float helper(float a, float b);\n\nnamespace {")
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha, kreg::to_float(xs[i]), kreg::to_float(ys[i]))",
                   "helper(alpha, kreg::to_float(xs[i])) + kreg::to_float(ys[i])")
    axpy_copy.path("helper.cpp").write_text("float helper(double a,\n             float b) { return a * b; }\n")
    axpy_copy.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["helper.cpp", "axpy_cpu.cpp"]')
    with pytest.raises(registry.BuildError) as info:
        registry.get(axpy_copy.name, device="cpu")
    first = info.value.first
    assert first is not None, str(info.value)
    assert first.file == str(axpy_copy.path("axpy_cpu.cpp")) and first.line == 6, first
    message = first.message
    assert "undefined symbol `helper(float, float)`" in message
    assert f"{axpy_copy.path('helper.cpp')}:1" in message, message
    assert "helper(double, float)" in message, message
    assert "parameter 1 is `double` there, `float` here" in message, message
    assert "add the file" not in message, message


def test_signatures_are_compared_by_parameter_types(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("// one\nconst float* helper(const float* x, int n = 4);\n"
                      "const float* helper(float const *x, long n) {\n  return x;\n}\n")
    found = link_errors.find_functions("helper(float const*, int)", [str(source)])
    assert [(f.line, f.parameters, f.is_definition) for f in found] == [
        (2, ["float const*", "int"], False), (3, ["float const*", "long"], True)]
    assert link_errors.parameter_types("helper(float const*, int)") == ["float const*", "int"]
    assert link_errors.differences(["float", "float"], ["double", "float"]) == [(1, "float", "double")]
