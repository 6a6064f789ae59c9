"""Uses installed AOT wheels (registry/tools/aot_wheel.py) in a fresh
interpreter that has no registry, as a wheel's user would:

    python -I tests/wheel_use.py SITE DEVICE OUT

SITE holds the installed packages (pip install --target SITE); DEVICE is cpu
or cuda. Calls each op on seeded inputs (inputs(), shared with the test
that compares), through the package's function, torch.ops, and
torch.compile(fullgraph=True); runs torch.library.opcheck; writes the
outputs to OUT (torch.save) and prints one line per kernel. Exits non-zero
if anything fails or the registry was imported.
"""
from __future__ import annotations

import sys
from pathlib import Path


def op_name(kernel: str) -> str:
    """The op a kernel's wheel defines: axpy's copies (axpy_nvrtc, a test's
    axpy_nvcc_cubin_...) define axpy."""
    return "axpy" if kernel.startswith("axpy") else {"scale": "scale_"}.get(kernel, kernel)


def inputs(kernel: str, device: str):
    """The arguments each kernel is called with, the same in both processes."""
    import torch

    generator = torch.Generator().manual_seed(7)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=generator).to(dtype).to(device)

    if kernel.startswith("axpy"):
        return [(randn(4099, dtype=dtype), randn(4099, dtype=dtype), 1.5)
                for dtype in (torch.float32, torch.float16, torch.bfloat16)]
    if kernel == "layernorm":
        return [(randn(64, 257), randn(257), randn(257), 1e-5), (randn(3, 17), randn(17), None, 1e-3)]
    if kernel == "scale":
        return [(randn(1000), 3.0)]
    raise KeyError(kernel)


def main() -> int:
    site, device, out = sys.argv[1:4]
    sys.path.insert(0, site)
    import importlib

    import torch

    results = {}
    for kernel in sorted(p.name[:-len("_ops")] for p in Path(site).iterdir() if p.name.endswith("_ops")):
        package = importlib.import_module(f"{kernel}_ops")
        torch._dynamo.reset()  # each kernel's compiles count apart: the lambda below is one code object
        name = op_name(kernel)
        function = getattr(package, name)
        namespace = kernel
        outputs = []
        for args in inputs(kernel, device):
            if kernel == "scale":
                (x, a), = [args]
                function(x, a)  # in place
                outputs.append(x.cpu())
                continue
            got = function(*args)
            again = getattr(getattr(torch.ops, namespace), name)(*args)
            compiled = torch.compile(lambda *a: function(*a), fullgraph=True, dynamic=False)(*args)
            for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, again))):
                assert torch.equal(a, b), f"{kernel}: torch.ops differs from the package's function"
            for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, compiled))):
                assert torch.equal(a, b), f"{kernel}: torch.compile differs"
            torch.library.opcheck(getattr(getattr(torch.ops, namespace), name).default, args)
            outputs.append(tuple(t.cpu() for t in got) if isinstance(got, tuple) else got.cpu())
        results[kernel] = outputs
        print(f"{kernel}: {len(outputs)} calls on {device}, torch.ops, torch.compile and opcheck agree")
    assert "registry" not in sys.modules, "a wheel imported the registry"
    torch.save(results, out)
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}: {len(results)} wheels, no registry imported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
