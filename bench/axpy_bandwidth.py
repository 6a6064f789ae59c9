"""axpy bandwidth beside torch.add(y, x, alpha=a), one run, one GPU.

    python bench/axpy_bandwidth.py [--n 268435456] [--kernel axpy] [--out bench/results]

--kernel names another build of axpy's op (axpy_nvrtc: device code through
NVRTC; axpy_cubin: nvcc -cubin, axpy_nvrtc with its compiler line switched,
written by bench/derived_kernels.py); its files are named
axpy_bandwidth-<kernel>.

Napkin math: axpy moves 3 * n * sizeof(T) bytes (read x, read y, write out);
GB/s below counts exactly those. The ceiling is a device-to-device copy of
1 GiB (read + write) measured in the same run. Medians of CUDA-event timings
over random inputs (never zeros). Writes axpy_bandwidth.json and .md.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import registry
from registry.notebook.timing import cuda_median_ms

from derived_kernels import provide as provide_derived_kernels

CHECKOUT = Path(__file__).resolve().parent.parent


def copy_gbps() -> float:
    src = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_median_ms(lambda: dst.copy_(src), iters=10)
    return 2 * src.numel() / ms / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 28)
    ap.add_argument("--kernel", default="axpy")
    ap.add_argument("--out", default=str(CHECKOUT / "bench" / "results"))
    args = ap.parse_args()
    provide_derived_kernels([args.kernel])  # axpy_cubin has no folder of its own
    axpy = registry.get(args.kernel, device="cuda")
    rows = []
    copy = copy_gbps()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(args.n, device="cuda").to(dtype)
        y = torch.randn(args.n, device="cuda").to(dtype)
        err = (axpy(x, y, 1.5).double() - (1.5 * x.double() + y.double())).abs().max().item()
        bytes_moved = 3 * args.n * x.element_size()
        ours = cuda_median_ms(lambda: axpy(x, y, 1.5))
        theirs = cuda_median_ms(lambda: torch.add(y, x, alpha=1.5))
        rows.append({"dtype": str(dtype).replace("torch.", ""), "registry_ms": ours, "torch_add_ms": theirs,
                     "registry_GBps": bytes_moved / ours / 1e6, "torch_add_GBps": bytes_moved / theirs / 1e6,
                     "ratio": theirs / ours, "max_abs_err": err})
        del x, y
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "n": args.n, "copy_GBps": copy,
            "kernel": args.kernel, "device_code": registry.status(args.kernel, device="cuda").device,
            "command": f"python bench/axpy_bandwidth.py --n {args.n} --kernel {args.kernel}"}
    stem = "axpy_bandwidth" if args.kernel == "axpy" else f"axpy_bandwidth-{args.kernel}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = [f"# {args.kernel} bandwidth on {meta['gpu']}", "",
          f"{meta['date']}, torch {meta['torch']}, n = {args.n}. Command: `{meta['command']}`.",
          f"Device copy ceiling in the same run: {copy:.0f} GB/s (read + write).",
          *([f"Device code: {meta['device_code']}."] if meta["device_code"] else []), "",
          "| dtype | registry axpy | torch.add(y, x, alpha) | registry / torch.add bandwidth | of copy | max abs err |",
          "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['dtype']} | {r['registry_ms']:.4f} ms, {r['registry_GBps']:.0f} GB/s | "
                  f"{r['torch_add_ms']:.4f} ms, {r['torch_add_GBps']:.0f} GB/s | {r['ratio']:.3f} | "
                  f"{r['registry_GBps'] / copy:.3f} | {r['max_abs_err']:.2g} |")
    (out / f"{stem}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
