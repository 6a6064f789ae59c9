"""The kernel contract: what "correct" means for an op, shared by
registry.sweep and the test suites (tests/kernel_contract.py).

Inputs are random, never zeros; the reference is the kernel's own float64
function (`reference.py` in its folder, loaded fresh so an edit counts); an
output passes when |out - ref| <= atol + rtol * |ref| elementwise, and never
when it holds NaN/inf where the reference is finite or is all zeros while the
reference is not.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch

# (rtol, atol) per dtype. The kernels compute in float and round once on store,
# so half an ulp of the output: fp16 eps 9.8e-4, bf16 eps 7.8e-3; float32's
# atol covers the rounding of alpha * x before the add when the sum cancels.
TOLERANCES = {
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (8e-3, 8e-3),
    "float64": (1e-12, 1e-12),
}
DEFAULT_SCALARS = {"float": 1.5, "int": 3, "bool": True}


@dataclass
class CheckResult:
    max_abs_err: float
    max_rel_err: float
    passed: bool
    reason: str = ""   # why it failed, empty when it passed


def compare(out: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float) -> CheckResult:
    """Elementwise |out - ref| <= atol + rtol * |ref|, computed in float64 on
    out's device. max_rel_err is max |out - ref| / max(|ref|, atol)."""
    out64 = out.detach().to(torch.float64)
    ref64 = ref.detach().to(device=out64.device, dtype=torch.float64)
    if out64.shape != ref64.shape:
        return CheckResult(float("nan"), float("nan"), False, f"shape {list(out.shape)} != reference {list(ref.shape)}")
    finite_ref = torch.isfinite(ref64)
    bad_nonfinite = finite_ref & ~torch.isfinite(out64)
    # Where the reference itself is inf/NaN the output must match it exactly.
    mismatched_special = ~finite_ref & ~((out64 == ref64) | (torch.isnan(out64) & torch.isnan(ref64)))
    err = (out64 - ref64).abs().where(finite_ref & torch.isfinite(out64), torch.zeros((), dtype=torch.float64, device=out64.device))
    max_abs = float(err.max()) if err.numel() else 0.0
    max_rel = float((err / ref64.abs().clamp_min(atol)).max()) if err.numel() else 0.0
    if bool(bad_nonfinite.any()):
        return CheckResult(float("inf"), float("inf"), False, f"{int(bad_nonfinite.sum())} NaN/inf elements where the reference is finite")
    if bool(mismatched_special.any()):
        return CheckResult(max_abs, max_rel, False, "output differs where the reference is inf/NaN")
    if out64.numel() and bool((ref64[finite_ref] != 0).any()) and not bool(out64.any()):
        return CheckResult(max_abs, max_rel, False, "output is all zeros but the reference is not")
    over = err > atol + rtol * ref64.abs()
    if bool(over.any()):
        return CheckResult(max_abs, max_rel, False, f"{int(over.sum())} of {out.numel()} elements out of tolerance")
    return CheckResult(max_abs, max_rel, True)


def load_reference(manifest):
    if not manifest.reference:
        raise ValueError(f"kernel {manifest.name!r} names no reference module; add reference = \"reference.py\" "
                         f"to {manifest.file} with a float64 function per op")
    path = Path(manifest.dir) / manifest.reference
    module_spec = importlib.util.spec_from_file_location(f"kreg_reference_{manifest.name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)  # loaded fresh: an edited reference counts
    return module


def make_args(spec, n: int, dtype, device: str, generator, overrides: dict) -> list:
    values = []
    for arg in spec.signature.args:
        if arg.type_name == "Tensor":
            values.append(torch.randn(n, generator=generator, device=device, dtype=torch.float32).to(dtype))
        elif arg.name in overrides:
            values.append(overrides[arg.name])
        else:
            values.append(DEFAULT_SCALARS[arg.type_name])
    return values


