"""A compile error is reported as soon as it happens: the builds beside it (the
binding, with torch's headers, takes 15-60 s here) are stopped, their
compilers killed, instead of being waited for."""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
import torch

import registry
from figures import figure
from registry.build.build_processes import processes_in


def test_a_syntax_error_does_not_wait_for_the_binding_beside_it(axpy_copy, cache_root):
    # A signature no earlier build had: its binding builds beside the kernel library.
    fresh = f"alpha_{uuid.uuid4().hex[:12]}"  # new to the cache and to ccache
    axpy_copy.edit("kernel.toml", "float alpha) -> Tensor", f"float {fresh}) -> Tensor")
    axpy_copy.edit("axpy_cpu.cpp", "return nullptr;", "return nullptr")  # the one-line mistake
    start = time.perf_counter()
    with pytest.raises(registry.BuildError) as info:
        registry.get(axpy_copy.name, device="cpu")
    error_s = time.perf_counter() - start
    assert info.value.first is not None and info.value.first.file.endswith("axpy_cpu.cpp"), str(info.value)
    staging = list((Path(cache_root) / "v1" / "tmp").glob(f"{os.getpid()}-*"))
    assert not [pid for folder in staging for pid in processes_in(folder)], "a compiler of the stopped build runs on"

    # The fix, with another fresh signature, builds a binding in full: what the error no longer waits for.
    axpy_copy.edit("axpy_cpu.cpp", "return nullptr\n", "return nullptr;\n")
    axpy_copy.edit("kernel.toml", f"float {fresh}) -> Tensor", f"float {fresh}_fixed) -> Tensor")
    start = time.perf_counter()
    op = registry.get(axpy_copy.name, device="cpu")
    binding_s = time.perf_counter() - start
    assert "axpy" in registry.status(axpy_copy.name, device="cpu").compiled  # the op's binding
    x = torch.randn(8)
    torch.testing.assert_close(op(x, x, 2.0), 3 * x)
    figure(f"syntax error reported after {error_s:.2f} s; the binding beside it builds in {binding_s:.2f} s")
    assert error_s < 0.5 * binding_s, (error_s, binding_s)
