"""What the registry's wrapper costs per call, beside torch's own op.

    python3 bench/op_overhead.py --out DIR [--kernels softmax rmsnorm ...]

For every forward op of a library kernel that names a torch baseline, per
dtype, in one process on one GPU:

  n = 1      per call: host time of 2000 back-to-back calls, synchronized at
             the end, over the number of calls (median of 5): the Python
             handle, argument checks, output allocation, dispatch and launch,
             for the op and for its baseline (`call_us`, `torch_call_us`);
             `binding_us` is the generated binding called without the
             Python handle (torch's dispatcher, checks, allocation, launch).
  largest    the sweep's largest shape (2^28 elements, 65536 x 4096): the op
             timed back to back between CUDA events (`loop_ms`, as a training
             loop runs it), and its kernels alone, replayed from a CUDA graph
             captured around one call (`kernel_ms`); the wrapper overhead is
             loop_ms / kernel_ms - 1. `single_ms` is one call between events
             on an idle GPU (what the sweep table reports), so it also holds
             the host time before the launch. The baseline's graph-replayed
             time gives the kernel-to-kernel ratio (`kernel_speedup`), its
             back-to-back time (`torch_loop_ms`) what eager launches cost
             torch's own op at that size, and bytes (every input read,
             every output written) over kernel_ms the bandwidth as a
             fraction of a device copy.

Writes DIR/op_overhead.md and prints the table.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import registry
from registry.notebook.checks import load_reference, make_args, results, shapes
from registry.notebook.dtype_sweep import _copy_bandwidth
from registry.notebook.timing import cuda_median_ms, graph_median_ms, median_seconds
from registry.resolve import find

KERNELS = ["softmax", "rmsnorm", "layernorm", "rowmax", "quantize", "scale"]
DTYPES = ["float32", "float16", "bfloat16"]
LARGEST = 1 << 28


def per_call_us(fn, calls: int = 2000, reps: int = 5) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times) * 1e6


def rows_for(kernel: str, copy_gbps: float) -> list[dict]:
    manifest = find(kernel)
    module = load_reference(manifest)
    handle = registry.get(kernel, device="cuda")
    rows = []
    for spec in manifest.ops:
        if not spec.baseline:
            continue
        op = handle if not hasattr(handle, "ops") else handle.ops[spec.name]
        baseline = getattr(module, spec.baseline)
        for dtype in [d for d in DTYPES if d in spec.dtypes]:
            torch_dtype = getattr(torch, dtype)
            generator = torch.Generator(device="cuda").manual_seed(1)
            row = dict(op=spec.name, dtype=dtype)
            small = make_args(spec, 1, torch_dtype, "cuda", generator, {})
            row["call_us"] = per_call_us(lambda: op(*small))
            # The generated binding alone (torch's dispatcher, checks, allocation, launch), without the handle.
            row["binding_us"] = per_call_us(lambda: op._fn(*small, op._address))
            row["torch_call_us"] = per_call_us(lambda: baseline(*small))
            row["call_ratio"] = row["torch_call_us"] / row["call_us"]
            big = make_args(spec, LARGEST, torch_dtype, "cuda", generator, {})
            row["shape"] = " ".join(f"{k}{list(v)}" for k, v in shapes(spec, LARGEST).items())
            outs = results(spec, big, op(*big))
            moved = sum(a.numel() * a.element_size() for a in big if isinstance(a, torch.Tensor)) + \
                sum(o.numel() * o.element_size() for o in outs)
            del outs
            row["single_ms"] = median_seconds(op, [big], "cuda", repeats=20) * 1e3
            row["loop_ms"] = cuda_median_ms(lambda: op(*big))
            try:
                row["kernel_ms"] = graph_median_ms(lambda: op(*big))
                row["torch_kernel_ms"] = graph_median_ms(lambda: baseline(*big))
                row["torch_loop_ms"] = cuda_median_ms(lambda: baseline(*big))
            except Exception as error:  # a capture that fails is reported, the table goes on
                row["note"] = f"graph: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
            else:
                row["overhead"] = row["loop_ms"] / row["kernel_ms"] - 1
                row["kernel_speedup"] = row["torch_kernel_ms"] / row["kernel_ms"]
                row["kernel_fraction_of_copy"] = moved / (row["kernel_ms"] / 1e3) / 1e9 / copy_gbps
            del big
            torch.cuda.empty_cache()
            rows.append(row)
    return rows


def main() -> int:
    import pandas as pd

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--kernels", nargs="*", default=KERNELS)
    args = parser.parse_args()
    free, _ = torch.cuda.mem_get_info()
    copy_gbps = _copy_bandwidth(free // 2)
    rows = []
    for kernel in args.kernels:
        try:
            rows += rows_for(kernel, copy_gbps)
        except Exception as error:
            rows.append(dict(op=kernel, note=f"error: {type(error).__name__}: {str(error).splitlines()[0][:200]}"))
        print(f"{kernel}: done", flush=True)
    columns = ["op", "dtype", "call_us", "binding_us", "torch_call_us", "call_ratio", "shape", "single_ms", "loop_ms",
               "kernel_ms", "overhead", "torch_kernel_ms", "torch_loop_ms", "kernel_speedup", "kernel_fraction_of_copy", "note"]
    table = pd.DataFrame(rows, columns=columns)
    text = table.to_string(index=False, float_format=lambda v: f"{v:.4g}")
    lines = [f"# Wrapper overhead and per-call cost on {torch.cuda.get_device_name()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"torch {torch.__version__}, device copy {copy_gbps:.0f} GB/s. Command: python3 bench/op_overhead.py "
             f"{' '.join(sys.argv[1:])}", "", "```", text, "```", ""]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "op_overhead.md").write_text("\n".join(lines))
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
