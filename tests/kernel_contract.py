"""The lab's test shape, derived from a kernel's manifest so every kernel gets
it for free: inputs for an op's signature, its float64 reference, and a
tolerance that scales with magnitude."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from registry import _core, knobs

# |out - ref| <= ATOL + RTOL * |ref|, elementwise: a few ulps of each dtype.
TOLERANCE = {
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    torch.float64: (1e-12, 1e-12),
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
SCALARS = {"float": 1.5, "int": 3, "bool": True}


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
    """Random tensors (never zeros) of shape (n,) and the default scalars."""
    args = []
    for arg in op.signature.args:
        if arg.type_name == "Tensor":
            t = torch.randn(n, generator=generator, dtype=torch.float32, device="cpu").to(dtype)
            args.append(t.to(device))
        else:
            args.append(SCALARS[arg.type_name])
    return args


def reference(manifest, op):
    path = Path(manifest.dir) / manifest.reference
    spec = importlib.util.spec_from_file_location(f"reference_{manifest.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, op.reference)


def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> tuple[bool, float, str]:
    """(passed, max abs error, why not). NaN, inf and unwritten zeros fail."""
    rtol, atol = TOLERANCE[dtype]
    got = out.detach().double().cpu()
    ref = ref.double().cpu()
    if got.shape != ref.shape:
        return False, float("inf"), f"shape {tuple(got.shape)} != {tuple(ref.shape)}"
    if not torch.isfinite(got).all():
        return False, float("inf"), "non-finite values in the output"
    err = (got - ref).abs()
    bound = atol + rtol * ref.abs()
    bad = int((err > bound).sum())
    worst = float(err.max()) if err.numel() else 0.0
    return bad == 0, worst, f"{bad} of {err.numel()} elements outside {atol} + {rtol}·|ref|" if bad else ""
