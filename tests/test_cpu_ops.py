"""The lab's test shape on the CPU build of every kernel: numerics against the
manifest's float64 reference for each dtype and size."""
from __future__ import annotations

import pytest
import torch

import registry
from kernel_contract import DTYPES, cases, check, check_op


@pytest.mark.parametrize("n", [1, 17, 1 << 16, 1 << 20], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("manifest,op,dtype", cases("cpu"), ids=lambda v: getattr(v, "name", v))
def test_numerics_against_reference(manifest, op, dtype, n):
    passed, worst, why = check_op(manifest, op, DTYPES[dtype], n, "cpu")
    assert passed, f"{manifest.name}.{op.name} {dtype} n={n}: {why} (max abs error {worst:.3g})"


def test_check_rejects_zeros_nan_and_wrong_values():
    ref = torch.randn(64, dtype=torch.float64) + 3
    assert check(ref.float(), ref, torch.float32)[0]
    assert not check(torch.zeros(64), ref, torch.float32)[0]
    assert not check(torch.full((64,), float("nan")), ref, torch.float32)[0]
    assert not check((ref + 1e-2).float(), ref, torch.float32)[0]


def test_misaligned_views_and_odd_sizes():
    op = registry.get("axpy", device="cpu")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        base_x, base_y = torch.randn(1001).to(dtype), torch.randn(1001).to(dtype)
        x, y = base_x[1:], base_y[1:]
        passed, _, why = check(op(x, y, 1.5), 1.5 * x.double() + y.double(), dtype)
        assert passed, why
