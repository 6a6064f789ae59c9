"""A function declared and called but defined nowhere fails the build at link
time, with the symbol demangled and the line that declares it; not at the
first dlopen with a message about a staging folder that is gone."""
from __future__ import annotations

import pytest
import torch

import registry
from registry.build import link_errors

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


def test_declaration_search_skips_calls(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("float x = helper(1, 2);\nreturn helper(a, b);\nfoo(helper(a));\n"
                      "// float helper(float, float);\nstatic inline float* helper(float a,\n")
    assert link_errors.find_declaration("helper(float, float)", [str(source)]) == (str(source), 5)
