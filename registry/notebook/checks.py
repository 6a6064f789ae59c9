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

from registry.errors import UsageError

# (rtol, atol) per dtype. The kernels compute in float and round once on store,
# so half an ulp of the output: fp16 eps 9.8e-4, bf16 eps 7.8e-3; float32's
# atol covers the rounding of alpha * x before the add when the sum cancels.
# Integer outputs are exact, except int8 quantised values: rounding x * 127 /
# amax in float rather than float64 may land one step away at a tie.
# A reference module may override per op: TOLERANCES = {"op": {"float32": (rtol, atol)}}.
TOLERANCES = {
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (8e-3, 8e-3),
    "float64": (1e-12, 1e-12),
}
INTEGER_TOLERANCES = {"int8": (0.0, 1.0)}  # every other integer or bool dtype: exact
DEFAULT_SCALARS = {"float": 1.5, "int": 3, "bool": True}


def tolerance(dtype_name: str, reference_module=None, op_name: str = "") -> tuple[float, float]:
    overrides = getattr(reference_module, "TOLERANCES", {}) if reference_module is not None else {}
    if dtype_name in overrides.get(op_name, {}):
        return tuple(overrides[op_name][dtype_name])
    if dtype_name in TOLERANCES:
        return TOLERANCES[dtype_name]
    return INTEGER_TOLERANCES.get(dtype_name, (0.0, 0.0))


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass
class CheckResult:
    max_abs_err: float
    max_rel_err: float
    passed: bool
    reason: str = ""   # why it failed, empty when it passed
    rtol: float = 0.0  # the tolerance it was checked with
    atol: float = 0.0
    used: float = 0.0  # the largest |out - ref| / (atol + rtol * |ref|): how near the tolerance it came
    output: str = ""   # which output decided (check_call)


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
    allowed = atol + rtol * ref64.abs()
    over = err > allowed
    # An exact tolerance (0, 0) is used up by any error at all.
    used = float((err / allowed).where(allowed > 0, (err > 0) * float("inf")).max()) if err.numel() else 0.0
    if bool(over.any()):
        return CheckResult(max_abs, max_rel, False, f"{int(over.sum())} of {out.numel()} elements out of tolerance",
                           rtol, atol, used)
    return CheckResult(max_abs, max_rel, True, "", rtol, atol, used)


def load_reference(manifest):
    if not manifest.reference:
        raise UsageError(f"kernel {manifest.name!r} names no reference module; add reference = \"reference.py\" "
                         f"to {manifest.file} with a float64 function per op")
    path = Path(manifest.dir) / manifest.reference
    module_spec = importlib.util.spec_from_file_location(f"kreg_reference_{manifest.name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)  # loaded fresh: an edited reference counts
    return module


def sweep_sizes(spec, n: int) -> dict[str, int]:
    """The seed's element counts (1, 17, 2^16, 2^28, ...) mapped onto an op's
    named sweep sizes (manifest `sweep`, e.g. x = "[rows, cols]"): the first
    Tensor's last size is the row length, its first the row count, every other
    name the row length. n = 1 is 1 x 1; n < 64 is the ragged n x 33 (17 x 33);
    larger n use rows of 1024 (up to 2^20 elements) or 4096."""
    names = []
    for _, dims in spec.sweep:
        names += [d for d in dims if not d.isdigit() and d not in names]
    if not names:
        return {}
    first = [d for d in spec.sweep[0][1] if not d.isdigit()]
    if n <= 1:
        cols, rows = 1, 1
    elif n < 64:
        cols, rows = 33, n
    else:
        cols = 1024 if n <= 1 << 20 else 4096
        rows = max(1, n // cols)
    sizes = {name: cols for name in names}
    if len(first) > 1:
        sizes[first[0]] = rows
    return sizes


def shapes(spec, n: int) -> dict[str, tuple]:
    """Each Tensor argument's shape for seed size n: from the sweep, or (n,)."""
    sizes = sweep_sizes(spec, n)
    if spec.sweep:
        return {name: tuple(int(d) if d.isdigit() else sizes[d] for d in dims) for name, dims in spec.sweep}
    return {a.name: (n,) for a in spec.signature.args if a.type_name == "Tensor" and not a.optional}


def make_args(spec, n: int, dtype, device: str, generator, overrides: dict, shape_of: dict | None = None) -> list:
    """Random inputs for one call: Tensors shaped by `shapes` (or `shape_of`: name -> shape), in the dispatch
    dtype or the manifest's fixed one (integers drawn from [0, 100)); a Tensor?
    without a sweep shape is None; scalars from `overrides`, else the
    signature's default, else DEFAULT_SCALARS."""
    import torch

    from registry import dtypes

    by_name = shape_of if shape_of is not None else shapes(spec, n)
    values = []
    for i, arg in enumerate(spec.signature.args):
        if arg.name in overrides:
            values.append(overrides[arg.name])
        elif arg.type_name == "Tensor":
            shape = by_name.get(arg.name)
            if shape is None:
                values.append(None)
                continue
            fixed = spec.arg_dtypes[i] if i < len(spec.arg_dtypes) else -1
            t_dtype = dtypes.torch_dtype(dtypes.NAMES[fixed]) if fixed >= 0 else dtype
            if t_dtype.is_floating_point:
                t = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(t_dtype)
            else:
                t = torch.randint(0, 100, shape, generator=generator, device=device).to(t_dtype)
            values.append(t)
        elif arg.has_default:
            from registry.op import _default_value

            values.append(_default_value(arg))
        elif arg.type_name in DEFAULT_SCALARS:
            values.append(DEFAULT_SCALARS[arg.type_name])
        elif arg.type_name == "int[]":
            values.append([])
        else:
            values.append(None)
    return values


def reference_args(args: list) -> list:
    """The inputs as the reference sees them: detached CPU copies (the op may
    write a Tensor(a!) argument), floating ones in float64."""
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.detach().to("cpu")
            out.append(a.to(torch.float64) if a.is_floating_point() else a.clone())
        else:
            out.append(a)
    return out


def results(spec, args: list, returned) -> list:
    """What an op produced, as a list: its returns, or for an op returning ()
    each Tensor(a!) argument after the call."""
    if not spec.signature.returns:
        return [args[i] for i, a in enumerate(spec.signature.args) if a.mutated]
    return list(returned) if isinstance(returned, (tuple, list)) else [returned]


def split_arguments(spec, args) -> tuple[tuple, dict]:
    """One call's arguments in signature order (make_args) as the op takes
    them: (positional, keyword-only by name). An op, its reference and its
    baseline all refuse a keyword-only argument passed positionally."""
    names = [a.name for a in spec.signature.args if a.keyword_only]
    if not names:
        return tuple(args), {}
    first = len(spec.signature.args) - len(names)  # keyword-only arguments come last
    return tuple(args[:first]), dict(zip(names, args[first:]))


def call_with(fn, spec, args):
    """fn(*args) with the keyword-only arguments passed by keyword."""
    positional, keywords = split_arguments(spec, args)
    return fn(*positional, **keywords)


def check_call(op, spec, reference_fn, args: list, reference_module=None) -> CheckResult:
    """Calls op and its reference on the same inputs and compares every output
    with the tolerance of its dtype. The result is the output that decided:
    the first that failed, else the one that came nearest its tolerance
    (ties: the first), with its errors and tolerance, so a row never shows
    one output's error beside another's tolerance."""
    ref_in = reference_args(args)
    outs = results(spec, args, call_with(op, spec, args))
    refs = call_with(reference_fn, spec, ref_in)
    refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
    if len(refs) != len(outs):
        return CheckResult(float("nan"), float("nan"), False,
                           f"the reference returned {len(refs)} values for {len(outs)} outputs")
    nearest = None
    names = [r.name for r in spec.signature.returns] or [a.name for a in spec.signature.args if a.mutated]
    for name, out, ref in zip(names, outs, refs):
        rtol, atol = tolerance(dtype_name(out.dtype), reference_module, spec.name)
        result = compare(out, ref, rtol, atol)
        result.output = name
        if not result.passed:
            result.reason = f"{name}: {result.reason}"
            return result
        if nearest is None or result.used > nearest.used:
            nearest = result
    return nearest if nearest is not None else CheckResult(0.0, 0.0, True)
