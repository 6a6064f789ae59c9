"""The kernel library on a GPU: numerics at the seed sizes and forward
bandwidth at the largest, beside torch's own op and a device copy.

    python3 bench/kernel_library.py --out DIR [--kernels softmax rmsnorm ...] [--sizes 1 17 ...]
                                    [--dtypes float32 ...]

Writes DIR/kernel_library.md: per kernel, the registry.sweep table (checked
against the float64 reference; GB/s; fraction of a device copy; torch
baseline time and speed-up), with the date, GPU and command.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

import registry

KERNELS = ["softmax", "rmsnorm", "layernorm", "rowmax", "quantize", "scale", "matmul"]
SIZES = [1, 17, 1 << 16, 1 << 24, 1 << 28]
COLUMNS = ["op", "dtype", "n", "shape", "passed", "median_ms", "gbps", "fraction_of_copy", "baseline_ms",
           "speedup", "note"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--kernels", nargs="*", default=KERNELS)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sizes", nargs="*", type=int, default=SIZES)
    parser.add_argument("--dtypes", nargs="*", default=None, help="default: each op's manifest dtypes")
    args = parser.parse_args()
    lines = [f"# Kernel library on {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"torch {torch.__version__}. Command: python3 bench/kernel_library.py {' '.join(sys.argv[1:])}", ""]
    ok = True
    for kernel in args.kernels:
        sizes = [s for s in args.sizes if kernel != "matmul" or s <= 1 << 24]  # the tiled matmul is for numerics
        result = registry.sweep(kernel, dtypes=args.dtypes, sizes=sizes, device="cuda", repeats=args.repeats)
        ok &= result.passed
        table = result.table[[c for c in COLUMNS if c in result.table.columns]]
        lines += [f"## {kernel} ({result.caption()})", "", "```", table.to_string(index=False), "```", ""]
        print(f"{kernel}: passed={result.passed}", flush=True)
        print(table.to_string(index=False), flush=True)
        # Written after every kernel: a run stopped at its time limit keeps the kernels it finished.
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "kernel_library.md").write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
