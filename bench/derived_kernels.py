"""Kernels the benchmarks time that have no folder of their own.

axpy_cubin is kernels/axpy_nvrtc with its [cuda] compiler line switched to
"nvcc-cubin": the two cubin paths take the same sources (kreg/device.cuh,
kreg/launch.h), so one folder is the worked example of both, and the
benchmarks write the other variant where the registry finds it.

    python bench/derived_kernels.py DIR [NAME ...]   # writes DIR/<name> for the derived names among NAME
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
# name -> (the checkout kernel it is copied from, its device compiler)
DERIVED = {"axpy_cubin": ("axpy_nvrtc", "nvcc-cubin")}
# Where provide() writes them by default: one folder for every process of a run
# (bench/gpu/percall_n1.sh builds in some processes and times in another).
DEFAULT_ROOT = Path(tempfile.gettempdir()) / "kreg-derived-kernels"


def write(root: Path, name: str) -> Path:
    """Writes the derived kernel `name` to root/name. Only files whose bytes
    differ are written: an unchanged kernel keeps its stamps, so its builds
    stay hits."""
    source, compiler = DERIVED[name]
    origin, target = CHECKOUT / "kernels" / source, Path(root) / name
    for path in sorted(p for p in origin.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "kernel.toml":
            line = b'compiler = "nvrtc"'
            assert line in data, f"{path} has no {line!r} to switch"
            data = data.replace(line, f'compiler = "{compiler}"'.encode(), 1)
        out = target / path.relative_to(origin)
        if not out.is_file() or out.read_bytes() != data:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    return target


def provide(names, root: Path | str = DEFAULT_ROOT) -> list[str]:
    """Writes the derived kernels among `names` under `root` and puts `root`
    first among the kernel roots of this process (and of the processes it
    starts); returns the names it wrote."""
    wanted = [n for n in names if n in DERIVED]
    for name in wanted:
        write(Path(root), name)
    if wanted:
        from registry import knobs

        knobs.put_kernel_root_first(root)
    return wanted


if __name__ == "__main__":
    root = Path(sys.argv[1])
    for name in sys.argv[2:] or DERIVED:
        if name in DERIVED:
            write(root, name)
