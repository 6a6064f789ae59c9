"""Edits the tests make to an axpy copy, and what the edited kernel computes:
they change AXPY_BIAS (or add a term to it) and read back the constant the
kernel adds beyond alpha * x + y."""
from __future__ import annotations

import pytest
import torch

import registry


def axpy_inputs(n: int = 17) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(n), torch.randn(n)


def axpy_bias(op) -> float:
    """The constant `op` (an axpy on the CPU) adds beyond alpha * x + y."""
    x, y = axpy_inputs()
    return float((op(x, y, 1.5) - (1.5 * x + y)).mean())


def include_extra_through_a_macro(copy, value: str) -> None:
    """Adds AXPY_EXTRA (= value) from extra.h, included as `#include NAME`:
    a header the include scan cannot see, only the compiler's depfile."""
    copy.path("extra.h").write_text(f"#define AXPY_EXTRA {value}\n")
    copy.edit("axpy_math.h", '#include "axpy/config.h"',
              '#include "axpy/config.h"\n#define AXPY_EXTRA_HEADER "extra.h"\n#include AXPY_EXTRA_HEADER')
    copy.edit("axpy_math.h", "+ AXPY_BIAS;", "+ AXPY_BIAS + AXPY_EXTRA;")


def edit_the_macro_included_header(copy):
    """Gets `copy` with extra.h included through a macro (AXPY_EXTRA = 0),
    sets AXPY_EXTRA to 5 and gets it again; returns the handle, checked to
    add 0 and then 5: the compiler's depfile put extra.h into the key."""
    include_extra_through_a_macro(copy, "0.0f")
    op = registry.get(copy.name)
    assert axpy_bias(op) == pytest.approx(0.0, abs=1e-6)
    copy.path("extra.h").write_text("#define AXPY_EXTRA 5.0f\n")
    registry.get(copy.name)
    assert axpy_bias(op) == pytest.approx(5.0, abs=1e-4)
    return op
