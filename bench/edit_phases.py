"""Where a CPU `.cpp` edit's time goes, phase by phase, in one process.

    python bench/edit_phases.py [--edits 12]

Copies kernels/axpy into a scratch kernel root and cache (the first get
builds the op's binding: ~1 min without ccache), then edits axpy_cpu.cpp
--edits times, each timed from the write to a checked `.item()`. Each phase
is timed by wrapping the function that does it (the names below), so nested
phases overlap: `compiler` is the compiler process from spawn to exit, and
`beyond compiler` is an edit's total less that. The first edit (importing
the build machinery) is a warm-up, not counted. Prints medians and minima.
"""
from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent

# (module, function, label): what is timed. Modules are imported after the
# environment points the registry at the scratch folders.
PHASES = [
    ("registry.resolve", "find", "find the manifest"),
    ("registry.environment", "build_environment", "environment facts"),
    ("registry._core", "make_plan", "plan (keys, memo, lookups)"),
    ("registry.builder.artifacts", "_claim", "claim (lock, staging folder)"),
    ("registry.builder.ccache", "remote_storage_configured", "ccache remote storage asked"),
    ("registry.builder.direct", "_run", "compiler"),
    ("registry.builder.direct", "_depfile_deps", "depfile read"),
    ("registry.load", "open_library", "dlopen"),
    ("registry._core", "publish_claim", "publish (entry, dep record)"),
    ("registry._core", "record_outcome", "record (memo)"),
    ("registry.load", "load", "load (tables, swap)"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=12)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="edit-phases-"))
    shutil.copytree(CHECKOUT / "kernels" / "axpy", work / "kernels" / "axpy")
    os.environ.update(REGISTRY_KERNELS_PATH=str(work / "kernels"), REGISTRY_CACHE_DIR=str(work / "cache"))
    import importlib

    import torch

    import registry
    from registry.builder import misses  # noqa: F401  (the modules PHASES name)

    spent: dict[str, float] = collections.defaultdict(float)
    for module_name, name, label in PHASES:
        module = importlib.import_module(module_name)
        real = getattr(module, name)

        def timed(*a, _real=real, _label=label, **k):
            t = time.perf_counter()
            try:
                return _real(*a, **k)
            finally:
                spent[_label] += time.perf_counter() - t

        setattr(module, name, functools.wraps(real)(timed))

    source = work / "kernels" / "axpy" / "axpy_cpu.cpp"
    original = source.read_text()
    op = registry.get("axpy", device="cpu")
    x = torch.ones(8)
    samples: dict[str, list[float]] = collections.defaultdict(list)
    for k in range(args.edits + 1):
        source.write_text(original.replace("axpy_element(alpha,", f"{k + 1}.0f + axpy_element(alpha,"))
        spent.clear()
        t = time.perf_counter()
        registry.get("axpy", device="cpu")
        got = op(x, x, 2.0)[0].item()
        total = time.perf_counter() - t
        assert got == 4.0 + k, (got, k)
        if k == 0:
            continue
        samples["edit, total"].append(total)
        samples["beyond compiler"].append(total - spent["compiler"])
        for label, s in spent.items():
            samples[label].append(s)
    print(f"{args.edits} edits, load average {os.getloadavg()}")
    for label, values in sorted(samples.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {label:32s} median {statistics.median(values) * 1e3:8.2f} ms   min {min(values) * 1e3:8.2f} ms")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
