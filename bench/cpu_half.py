"""axpy on the CPU per dtype: is float16 as cheap as the bytes say?

At 2^20 elements each dtype moves 3 arrays; float16 and bfloat16 move half
the bytes of float32, so with hardware conversions they should cost about
as much as float32 or less. Without F16C every float16 conversion is a call
into libgcc's soft-float routines, and float16 is tens of times slower.

    python bench/cpu_half.py [--n 1048576] [--reps 50]

Prints the median time per call of each dtype, and the default C++ flags the
registry gave the kernel library (registry.environment.host_cxx_flags).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import registry
from registry import environment


def median_ms(op, args, reps: int) -> float:
    for _ in range(3):
        op(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        op(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    op = registry.get("axpy", device="cpu")
    flags = getattr(environment, "host_cxx_flags", lambda: ())()
    print(f"axpy, CPU, n = {args.n}, median of {args.reps}; default host flags: {' '.join(flags) or 'none'}")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, y = torch.randn(args.n).to(dtype), torch.randn(args.n).to(dtype)
        print(f"  {str(dtype).removeprefix('torch.'):9s} {median_ms(op, (x, y, 1.5), args.reps):8.3f} ms")


if __name__ == "__main__":
    main()
