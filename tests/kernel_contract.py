"""The lab's test shape, derived from each kernel's manifest so every kernel
gets it for free. What "correct" means (inputs, reference, tolerance) is
registry.notebook.checks, the same contract registry.sweep applies."""
from __future__ import annotations

import torch

from registry import _core, knobs
from registry.notebook.checks import TOLERANCES, check_call, compare, load_reference, make_args as _make_args

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def manifests() -> list:
    roots = [str(knobs.CHECKOUT / "kernels")]
    return [_core.parse_manifest(k.manifest) for k in _core.discover_kernels(roots)]


def cases(backend: str) -> list[tuple]:
    """(kernel, op spec, dtype name) for every op and dtype a backend has."""
    out = []
    for m in manifests():
        if (m.cuda if backend == "cuda" else m.cpu).present:
            out += [(m, op, d) for op in m.ops for d in op.dtypes]
    return out


def make_args(op, n: int, dtype: torch.dtype, device: str, generator: torch.Generator) -> list:
    """Drawn on the CPU from `generator` (a CPU generator), then moved."""
    args = _make_args(op, n, dtype, "cpu", generator, {})
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


def reference(manifest, op):
    return getattr(load_reference(manifest), op.reference)


def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> tuple[bool, float, str]:
    """(passed, max abs error, why not)."""
    name = next(k for k, v in DTYPES.items() if v == dtype)
    result = compare(out, ref, *TOLERANCES[name])
    return result.passed, result.max_abs_err, result.reason


def op_handle(manifest, op, device: str):
    """The handle of one op: `get` returns an OpGroup for a kernel with several."""
    import registry

    handle = registry.get(manifest.name, device=device)
    return handle.ops[op.name] if len(manifest.ops) > 1 else handle


def check_op(manifest, op, dtype: torch.dtype, n: int, device: str) -> tuple[bool, float, str]:
    """Runs one op on seed size n (mapped onto its sweep shapes) against its
    reference; (passed, max abs error, why not)."""
    gen = torch.Generator().manual_seed(n)
    args = make_args(op, n, dtype, device, gen)
    module = load_reference(manifest)
    result = check_call(op_handle(manifest, op, device), op, getattr(module, op.reference), args, module)
    return result.passed, result.max_abs_err, result.reason
