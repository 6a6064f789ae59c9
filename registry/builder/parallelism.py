"""How many builds registry.tune runs at once: as many as memory holds, not
one per core.

A compile is single-threaded and CPU-bound (nvcc's --threads spreads only
gencode targets, and a tune's build has one), so the kernel shares the cores
fairly among however many run: n equal compiles on c cores, all started at
once, end after n/c of one compile's time; in waves of c they end after
ceil(n/c) (kernels/gemm's 23 configs on 16 cores: 1.44 against 2). What
bounds them is memory: each compile holds up to COMPILE_PEAK_BYTES, and a
machine that swaps is slower than one that queues.
"""
from __future__ import annotations

import os

# A build of one kernels/gemm config (one CUTLASS 3.x Hopper unit through nvcc)
# peaked at 3.7 GB resident (the largest process of its tree, /usr/bin/time -v),
# rounded up: smaller compiles are bounded by it too, which errs only on the
# side of fewer at once.
COMPILE_PEAK_BYTES = 4 << 30


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo, or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def parallel_builds(builds: int, compiles_per_build: int = 1) -> int:
    """How many of `builds` to run at once (each running up to
    `compiles_per_build` compilers): all of them where memory holds their
    compiles, else as many as it holds (at least one); one per core where
    memory cannot be read."""
    available = available_memory_bytes()
    if available is None:
        return max(1, min(builds, os.cpu_count() or 1))
    held = available // (COMPILE_PEAK_BYTES * max(1, compiles_per_build))
    return max(1, min(builds, held))
