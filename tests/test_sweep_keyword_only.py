"""Sweeps and the lab's test shape (kernel_contract.check_op, which the
generated per-kernel tests use) pass keyword-only arguments by keyword, to
the op, its reference and its baseline."""
from __future__ import annotations

import pytest
import torch

import registry
from registry import _core
from registry.notebook.checks import check_call

from kernel_contract import check_op
from test_fakes_with_defaults import ROWSTAT_CPU, ROWSTAT_TOML

pytestmark = pytest.mark.usefixtures("cache_root")

REFERENCE = '''
def rowstat(x, w, scale=2.0, *, offset=0):
    s = (x * w).sum(-1) if w is not None else x.sum(-1)
    return s * scale + offset


def torch_rowstat(x, w, scale=2.0, *, offset=0):
    return (x * w).sum(-1) * scale + offset
'''


@pytest.fixture(scope="module")
def rowstat_swept(kernels_root):
    folder = kernels_root / "rowstat_swept"
    folder.mkdir(exist_ok=True)
    toml = ROWSTAT_TOML.replace('binding = "torch-library"\n', 'reference = "reference.py"\n')
    toml = toml.replace('sweep = {', 'baseline = "torch_rowstat"\nsweep = {')
    (folder / "kernel.toml").write_text(toml)
    (folder / "rowstat_cpu.cpp").write_text(ROWSTAT_CPU)
    (folder / "reference.py").write_text(REFERENCE)
    registry.get("rowstat_swept", device="cpu")
    return folder


def test_every_sweep_row_of_a_keyword_only_op_runs(rowstat_swept):
    result = registry.sweep("rowstat_swept", sizes=[1, 17, 4096], device="cpu", repeats=2)
    table = result.table
    assert result.passed, table.to_string()
    assert (table["baseline_ms"] > 0).all(), table.to_string()


def test_sweep_sets_a_keyword_only_argument_by_name(rowstat_swept):
    result = registry.sweep("rowstat_swept", sizes=[17], device="cpu", repeats=1, args={"offset": 5})
    assert result.passed, result.table.to_string()


def test_the_lab_check_passes_keyword_only_arguments_by_keyword(rowstat_swept):
    manifest = _core.parse_manifest(str(rowstat_swept / "kernel.toml"))
    op = manifest.ops[0]
    passed, _, why = check_op(manifest, op, torch.float32, 17, "cpu")
    assert passed, why
    seen = []
    result = check_call(lambda *a, **k: seen.append((len(a), sorted(k))) or registry.get("rowstat_swept", device="cpu")(*a, **k),
                        op, lambda x, w, scale=2.0, *, offset=0: (x * w).sum(-1) * scale + offset,
                        [torch.randn(3, 8), torch.randn(8), 2.0, 1])
    assert result.passed, result.reason
    assert seen == [(3, ["offset"])]
