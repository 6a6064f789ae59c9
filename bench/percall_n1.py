"""Per-call host cost at n = 1, measured steadily: each op's handle against
its torch baseline, interleaved round by round.

    python3 bench/percall_n1.py --out DIR [--kernels softmax ...] [--rounds 40]
                                [--calls 1000] [--pin CORE] [--device cuda]

For every forward op of a library kernel that names a torch baseline
(`baseline` in kernel.toml, the function in its reference.py), and for the
three axpy builds (nvcc `axpy`, NVRTC `axpy_nvrtc`, nvcc -cubin
`axpy_cubin`: axpy_nvrtc with its compiler line switched, written by
bench/derived_kernels.py) against `torch.add(y, x, alpha=alpha)`, per dtype
(float32 / float16 / bfloat16 where the op has it), at the smallest shape
(1 element, 1 x 1 rows; inputs drawn from randn):

  A round times `calls` back-to-back calls of each contender and
  synchronizes the device after them; per call = that time / calls. The
  contenders take turns going first, round after round. Contenders: `ours`
  (the Op handle, as a user calls it), `torch` (the baseline), and, to show
  where the handle's time goes, `fast` (the binding's fast entry called
  without the handle's Python frame) and `dispatcher` (the generated op
  through torch.ops, the path everything that is not a plain call takes);
  `bare` is torch's op called without the baseline's Python wrapper (BARE),
  for information.

Reported per row: min and median over the rounds for each contender, the
ratio torch / ours of the medians and of the mins (>= 1.0: we are no slower
than the baseline), and the median over rounds of the paired per-round ratio.

Noise control: the process is pinned to one CPU core (`--pin`, default 3;
-1 leaves it unpinned), torch uses one intra-op thread, Python's garbage
collector is off while timing, and every contender is warmed up first.
Writes DIR/percall_n1.md and DIR/percall_n1.json and prints each row as it
is done.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import registry
from registry.notebook.checks import load_reference, make_args
from registry.resolve import find

from derived_kernels import provide as provide_derived_kernels

KERNELS = ["softmax", "rmsnorm", "layernorm", "rowmax", "quantize", "scale", "matmul",
           "axpy", "axpy_nvrtc", "axpy_cubin"]
DTYPES = ["float32", "float16", "bfloat16"]
# Scalars that keep the data what randn drew, call after call (scale_ works in place).
OVERRIDES = {"scale_": {"a": -1.0}, "axpy": {"alpha": 1.5}}


def torch_add(x, y, alpha):
    """axpy's baseline, the one the target names: out = y + alpha * x."""
    return torch.add(y, x, alpha=alpha)


# torch's own op called bare (its C binding, no wrapper's Python frame), for
# the ops whose reference.py baseline wraps one: for information; the target is
# the baseline. Each gives (function, arguments) for the op's arguments.
BARE = {
    "softmax": lambda x, t: (torch.softmax, (x, -1)) if t == 1.0 else None,
    "rmsnorm": lambda x, w, eps: (torch.rms_norm, (x, (x.shape[-1],), w, eps)),
    "layernorm": lambda x, w, b, eps: (torch.layer_norm, (x, (x.shape[-1],), w, b, eps)),
    "rowmax": lambda x: (torch.max, (x, -1)),
    "scale_": lambda x, a: (torch.Tensor.mul_, (x, a)),
    "matmul": lambda a, b: (torch.matmul, (a, b)),
}


def contenders(op, baseline, args, bare=None) -> dict:
    """Each contender as a no-argument callable of the same shape (one lambda frame each)."""
    args = tuple(args)
    fast, fn, address = op._fast, op._fn, op._address
    calls = {"ours": lambda: op(*args), "torch": lambda: baseline(*args)}
    if baseline is torch_add:  # the bare C binding, as a user writes it: no wrapper's frame
        x, y, alpha = args
        add = torch.add
        calls["torch"] = lambda: add(y, x, alpha=alpha)
    if bare is not None and bare(*args) is not None:
        bare_fn, bare_args = bare(*args)
        calls["bare"] = lambda: bare_fn(*bare_args)
    if fast is not None:
        calls["fast"] = lambda: fast(*args)
    calls["dispatcher"] = lambda: fn(*args, address)
    return calls


def time_rounds(calls: dict, rounds: int, per_round: int, sync) -> dict[str, list[float]]:
    """Per-call microseconds of each contender, one entry a round."""
    names = list(calls)
    for fn in calls.values():  # warm: caches, the allocator's pool, lazy binds
        for _ in range(200):
            fn()
    sync()
    times = {name: [] for name in names}
    loop = range(per_round)
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]  # each goes first in turn
            if r % 2:
                order.reverse()
            for name in order:
                fn = calls[name]
                sync()
                start = clock()
                for _ in loop:
                    fn()
                sync()
                times[name].append((clock() - start) / per_round * 1e6)
    finally:
        gc.enable()
    return times


def row_of(kernel: str, op_name: str, dtype: str, times: dict) -> dict:
    row = dict(kernel=kernel, op=op_name, dtype=dtype)
    for name, t in times.items():
        row[f"{name}_min"] = min(t)
        row[f"{name}_med"] = statistics.median(t)
    row["ratio_med"] = row["torch_med"] / row["ours_med"]
    row["ratio_min"] = row["torch_min"] / row["ours_min"]
    row["paired_med"] = statistics.median(t / o for t, o in zip(times["torch"], times["ours"]))
    if "bare" in times:
        row["bare_ratio_med"] = row["bare_med"] / row["ours_med"]
    row["meets"] = "yes" if row["ratio_med"] >= 1.0 and row["paired_med"] >= 1.0 else "no"
    return row


def rows_for(kernel: str, device: str, rounds: int, per_round: int, sync) -> list[dict]:
    manifest = find(kernel)
    module = load_reference(manifest)
    handle = registry.get(kernel, device=device)
    rows = []
    for spec in manifest.ops:
        axpy = kernel.startswith("axpy")
        if not spec.baseline and not axpy:
            continue
        op = handle if not hasattr(handle, "ops") else handle.ops[spec.name]
        baseline = torch_add if axpy else getattr(module, spec.baseline)
        for dtype in [d for d in DTYPES if d in spec.dtypes]:
            generator = torch.Generator(device=device).manual_seed(1)
            args = make_args(spec, 1, getattr(torch, dtype), device, generator, OVERRIDES.get(spec.name, {}))
            times = time_rounds(contenders(op, baseline, args, BARE.get(spec.name)), rounds, per_round, sync)
            row = row_of(kernel, spec.name, dtype, times)
            rows.append(row)
            print(f"{kernel:10s} {spec.name:13s} {dtype:8s} ours med {row['ours_med']:6.2f} us "
                  f"(min {row['ours_min']:6.2f})  torch med {row['torch_med']:6.2f} us (min {row['torch_min']:6.2f})  "
                  f"torch/ours {row['ratio_med']:.3f} (paired {row['paired_med']:.3f}, min {row['ratio_min']:.3f})  "
                  f"fast {row.get('fast_med', float('nan')):6.2f}  dispatcher {row['dispatcher_med']:6.2f}  "
                  f"bare torch {row.get('bare_med', float('nan')):6.2f}",
                  flush=True)
    return rows


def _or_dash(row: dict, key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--kernels", nargs="*", default=KERNELS)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=1000, help="back-to-back calls a round")
    parser.add_argument("--pin", type=int, default=3, help="CPU core to pin the process to (-1: none)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--note", default="", help="a line for the header (what tree, what run)")
    args = parser.parse_args()
    provide_derived_kernels(args.kernels)  # axpy_cubin has no folder of its own
    pinned = "not pinned"
    if args.pin >= 0 and hasattr(os, "sched_setaffinity"):
        core = sorted(os.sched_getaffinity(0))[args.pin % len(os.sched_getaffinity(0))]
        os.sched_setaffinity(0, {core})
        pinned = f"pinned to CPU core {core}"
    torch.set_num_threads(1)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"# {device_name}, {pinned}, {args.rounds} rounds x {args.calls} calls", flush=True)
    rows = []
    for kernel in args.kernels:
        try:
            rows += rows_for(kernel, args.device, args.rounds, args.calls, sync)
        except Exception as error:  # one kernel that fails is a row, the run goes on
            rows.append(dict(kernel=kernel, op="", dtype="", note=f"{type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200] if str(error) else ''}"))
            print(f"{kernel}: {rows[-1]['note']}", flush=True)
    lines = [f"# Per-call cost at n = 1 on {device_name}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"torch {torch.__version__}, Python {sys.version.split()[0]}, {pinned}, one intra-op thread, "
             f"gc off while timing; {args.rounds} rounds of {args.calls} back-to-back calls per contender, "
             "the device synchronized after each, the contenders taking turns going first.",
             f"Command: python3 bench/percall_n1.py {' '.join(sys.argv[1:])}"]
    if args.note:
        lines.append(args.note)
    lines += ["", "Microseconds per call (median of rounds, min in brackets). torch/ours: ratio of the medians "
              "(of the mins; the median of the per-round paired ratios); >= 1.0 means the handle is no slower "
              "than the baseline. fast: the fast entry without the handle's Python frame; dispatcher: the "
              "generated op through torch.ops; bare: torch's op called bare where the baseline wraps one "
              "(softmax: torch.softmax(x, -1), rmsnorm: torch.rms_norm, layernorm: torch.layer_norm, rowmax: "
              "torch.max(x, -1), scale_: Tensor.mul_, matmul: torch.matmul), for information; axpy's baseline "
              "is torch.add(y, x, alpha=alpha) called bare.", "",
              "| kernel | op | dtype | ours | torch | torch/ours med | min | paired | fast | dispatcher | bare | "
              "bare/ours | meets |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "note" in r:
            lines.append(f"| {r['kernel']} | | | | | | | | | | | | error: {r['note']} |")
            continue
        lines.append(f"| {r['kernel']} | {r['op']} | {r['dtype']} | {r['ours_med']:.2f} ({r['ours_min']:.2f}) | "
                     f"{r['torch_med']:.2f} ({r['torch_min']:.2f}) | {r['ratio_med']:.3f} | {r['ratio_min']:.3f} | "
                     f"{r['paired_med']:.3f} | {r.get('fast_med', float('nan')):.2f} | {r['dispatcher_med']:.2f} | "
                     f"{_or_dash(r, 'bare_med', '.2f')} | {_or_dash(r, 'bare_ratio_med', '.3f')} | {r['meets']} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "percall_n1.md").write_text("\n".join(lines) + "\n")
    (out / "percall_n1.json").write_text(json.dumps(dict(device=device_name, torch=torch.__version__, pinned=pinned,
                                                         rounds=args.rounds, calls=args.calls, rows=rows), indent=1))
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
