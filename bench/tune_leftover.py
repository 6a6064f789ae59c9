"""Does registry.tune leave the process that tuned slower? Per-call time of
one op before the tune, after it in the same process, and in fresh processes.

    python3 bench/tune_leftover.py --out DIR [--kernel softmax] [--n 256] [--dtype float32]
                                   [--tune-shapes 4096x256,65536x1024] [--rounds 30] [--calls 256]

A sample is `calls` calls at make_args size n, each followed by
torch.cuda.synchronize() (what a notebook cell timing one call sees), in us
per call; each figure is the median of `rounds` samples. In an empty cache
(a new REGISTRY_CACHE_DIR), three processes time the same op on the same GPU,
one at a time, in interleaved rounds (the order rotates each round):

  before     this process, after a get, before the tune
  untuned    a fresh process started before the tune (its handle never tuned):
             the control, timed in both phases, so drift of the machine shows
  after      this process after registry.tune(force=True, keep=True) at
             --tune-shapes (n's shape is in no tuned bucket, or its winner is
             named in the report: the default config runs there)
  fresh      a fresh process started after the tune: the table applies on get
  worker?    the isolated workers alive in this process after the tune (0 is
             what the tune should leave; --leave-worker keeps one, as the
             tune used to, to measure what a live worker alone costs)

Read "after" against "before" and "fresh": a leftover of the tune in this
process shows as after > fresh ~ before, with "untuned" flat across phases.
Writes DIR/tune_leftover.md and .json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def setup(kernel: str, n: int, dtype: str):
    import torch

    import registry
    from registry.notebook.checks import make_args

    op = registry.get(kernel, device="cuda")
    op = op if hasattr(op, "_fast") else next(iter(op.ops.values()))
    args = make_args(op._spec, n, getattr(torch, dtype), "cuda", torch.Generator(device="cuda").manual_seed(0), {})
    for _ in range(200):
        op(*args)
    torch.cuda.synchronize()
    return op, args


def sample(op, args, calls: int) -> float:
    import torch

    synchronize = torch.cuda.synchronize
    synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        op(*args)
        synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def child(kernel: str, n: int, dtype: str, calls: int) -> None:
    """A fresh process: times one sample per line read on stdin."""
    op, args = setup(kernel, n, dtype)
    routed = op._table.route_count > 0
    print(json.dumps({"ready": True, "routed": routed}), flush=True)
    for _ in sys.stdin:
        print(json.dumps({"us": sample(op, args, calls)}), flush=True)


class Fresh:
    def __init__(self, args):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--child", "--kernel", args.kernel, "--n", str(args.n), "--dtype", args.dtype,
             "--calls", str(args.calls)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(CHECKOUT)})
        self.hello = json.loads(self.process.stdout.readline())

    def sample(self) -> float:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())["us"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def interleaved(contenders: dict, rounds: int) -> dict:
    times = {label: [] for label in contenders}
    labels = list(contenders)
    for r in range(rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for label in order:
            times[label].append(contenders[label]())
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--tune-shapes", default="4096x256,65536x1024")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=256)
    parser.add_argument("--leave-worker", action="store_true",
                        help="after the tune, one isolated call of the op: a CUDA worker stays alive in this "
                             "process, as the tune used to leave its checks' worker (what that alone costs)")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.kernel, args.n, args.dtype, args.calls)
        return
    os.environ.setdefault("REGISTRY_CACHE_DIR", tempfile.mkdtemp(prefix="tune-leftover-cache-"))
    args.out.mkdir(parents=True, exist_ok=True)
    import threading

    import torch

    import registry

    op, inputs = setup(args.kernel, args.n, args.dtype)
    untuned = Fresh(args)
    before = interleaved({"before": lambda: sample(op, inputs, args.calls), "untuned": untuned.sample}, args.rounds)
    threads_before = threading.active_count()
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.tune_shapes.split(",")]
    start = time.perf_counter()
    result = registry.tune(args.kernel, shapes=shapes, dtypes=[args.dtype], device="cuda", force=True, keep=True)
    tune_s = time.perf_counter() - start
    if args.leave_worker:
        registry.get(args.kernel, device="cuda", isolate=True)(*inputs)
        torch.cuda.synchronize()
    from registry.isolation.supervisor import SUPERVISOR

    workers = len(SUPERVISOR.workers)
    fresh = Fresh(args)
    after = interleaved({"after": lambda: sample(op, inputs, args.calls), "untuned": untuned.sample,
                         "fresh": fresh.sample}, args.rounds)
    untuned.close()
    fresh.close()
    figures = {
        "kernel": args.kernel, "n": args.n, "leave_worker": args.leave_worker, "dtype": args.dtype, "calls": args.calls, "rounds": args.rounds,
        "tune_shapes": args.tune_shapes, "tune_s": tune_s, "winners": {str(k): v for k, v in result.winners.items()},
        "routed_after": op._table.route_count > 0, "fresh_routed": fresh.hello["routed"],
        "before_us": before["before"], "untuned_before_us": before["untuned"],
        "after_us": after["after"], "untuned_after_us": after["untuned"], "fresh_us": after["fresh"],
        "workers_after_tune": workers, "threads_before": threads_before, "threads_after": threading.active_count(),
        "device": torch.cuda.get_device_name(),
    }
    figures["after_over_before"] = figures["after_us"] / figures["before_us"]
    figures["after_over_fresh"] = figures["after_us"] / figures["fresh_us"]
    lines = [f"# registry.tune leftovers: {args.kernel} at n = {args.n} ({args.dtype}), {figures['device']}", "",
             f"`python3 {' '.join(sys.argv)}`; medians of {args.rounds} interleaved rounds of {args.calls} calls, "
             f"each call followed by torch.cuda.synchronize(); tune at {args.tune_shapes} took {tune_s:.1f} s.", "",
             "| process | before the tune (us/call) | after the tune (us/call) |", "|---|---|---|",
             f"| this one | {figures['before_us']:.2f} | {figures['after_us']:.2f} |",
             f"| fresh, started before (untuned) | {figures['untuned_before_us']:.2f} | "
             f"{figures['untuned_after_us']:.2f} |",
             f"| fresh, started after (table) | | {figures['fresh_us']:.2f} |", "",
             f"after / before {figures['after_over_before']:.3f}, after / fresh {figures['after_over_fresh']:.3f}; "
             f"isolated workers alive after the tune: {workers}; threads {threads_before} -> "
             f"{figures['threads_after']}; winners {figures['winners']}"]
    text = "\n".join(lines) + "\n"
    (args.out / "tune_leftover.md").write_text(text)
    (args.out / "tune_leftover.json").write_text(json.dumps(figures, indent=1))
    print(text)


if __name__ == "__main__":
    main()
