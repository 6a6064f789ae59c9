"""Keys any process can reconstruct from content alone, with a header the scan
cannot see (`#define H "extra.h"` then `#include H`): two checkouts sharing
one cache, a process whose memo is gone, and a revert to built content."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import registry
from axpy_edits import axpy_bias, edit_the_macro_included_header, include_extra_through_a_macro
from conftest import CHECKOUT

# A fresh process: get, then report what it computed and what it compiled.
_CHILD = """
import json, sys
import torch
import registry
from registry.builder import step
name = sys.argv[1]
op = registry.get(name)
torch.manual_seed(0)
x, y = torch.randn(17), torch.randn(17)
status = registry.status(name)
print(json.dumps({
    "bias": float((op(x, y, 1.5) - (1.5 * x + y)).mean()),
    "lib_compiles": [kind for _, kind in step.builds_run].count("kernel-lib"),
    "outcome": status.outcome, "key": status.key,
}))
"""


def _get_in_another_process(name: str, kernels_root: Path) -> dict:
    env = dict(os.environ, REGISTRY_KERNELS_PATH=str(kernels_root), PYTHONPATH=str(CHECKOUT))
    done = subprocess.run([sys.executable, "-c", _CHILD, name], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _checkout_copy(kernel, where: Path, extra_value: str) -> Path:
    """Another checkout of the same kernel (same name, another path)."""
    root = where / "kernels"
    shutil.copytree(kernel.dir, root / kernel.name)
    (root / kernel.name / "extra.h").write_text(f"#define AXPY_EXTRA {extra_value}\n")
    return root


def test_two_checkouts_sharing_a_cache_each_get_their_own_content(axpy_copy, compiles, tmp_path):
    edit_the_macro_included_header(axpy_copy)
    edited_key = registry.status(axpy_copy.name).key

    # Checkout B has the same edit: it reconstructs the key and reuses the build.
    same = _get_in_another_process(axpy_copy.name, _checkout_copy(axpy_copy, tmp_path / "b", "5.0f"))
    assert same["bias"] == pytest.approx(5.0, abs=1e-4)
    assert same["key"] == edited_key
    assert (same["lib_compiles"], same["outcome"]) == (0, "cache")

    # Checkout C still has the first content: the first build, without compiling.
    old = _get_in_another_process(axpy_copy.name, _checkout_copy(axpy_copy, tmp_path / "c", "0.0f"))
    assert old["bias"] == pytest.approx(0.0, abs=1e-6)
    assert (old["lib_compiles"], old["outcome"]) == (0, "cache")
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2


def test_a_process_whose_memo_is_gone_gets_the_edited_content(axpy_copy, cache_root, kernels_root):
    include_extra_through_a_macro(axpy_copy, "0.0f")
    assert axpy_bias(registry.get(axpy_copy.name)) == pytest.approx(0.0, abs=1e-6)
    axpy_copy.path("extra.h").write_text("#define AXPY_EXTRA 3.0f\n")
    memos = list((cache_root / "v1" / "memo").glob(f"{axpy_copy.name}.*"))
    assert memos
    for memo in memos:
        memo.unlink()
    fresh = _get_in_another_process(axpy_copy.name, kernels_root)
    assert fresh["bias"] == pytest.approx(3.0, abs=1e-4)
    assert fresh["lib_compiles"] == 1


def test_reverting_a_macro_included_header_reuses_the_first_build(axpy_copy, compiles):
    include_extra_through_a_macro(axpy_copy, "0.0f")
    op = registry.get(axpy_copy.name)
    first_key = registry.status(axpy_copy.name).key
    axpy_copy.path("extra.h").write_text("#define AXPY_EXTRA 5.0f\n")
    registry.get(axpy_copy.name)
    assert axpy_bias(op) == pytest.approx(5.0, abs=1e-4)
    axpy_copy.path("extra.h").write_text("#define AXPY_EXTRA 0.0f\n")
    registry.get(axpy_copy.name)
    assert axpy_bias(op) == pytest.approx(0.0, abs=1e-6)
    status = registry.status(axpy_copy.name)
    assert (status.outcome, status.key) == ("cache", first_key)
    assert status.changes == ["file:extra.h changed"]
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2
