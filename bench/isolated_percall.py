"""Per-call cost of an isolated op beside the normal op, and the overhead at
a large size.

    python3 bench/isolated_percall.py [--device cpu|cuda] [--sizes 1 268435456]
                                      [--rounds 30] [--calls 200] [--big-calls N]
                                      [--kernel axpy|scale] [--out DIR]

For axpy (out = alpha * x + y, float32; or scale, x *= a in place, whose
argument an isolated CUDA call watches on each side) at each size: `normal`
is registry.get(kernel), `isolated` registry.get(kernel, isolate=True), both
called as a user calls them, interleaved round by round (each round times
`calls` back-to-back calls and synchronizes the device). Reported per size:
the median over rounds of the per-call time of each (a round's mean, so a
busy machine's scheduling tail counts), the isolated op's extra cost (median
difference) and its overhead in percent, the median of calls timed one
by one (each synchronized), and each op's best round (the lowest round mean:
what a call costs when nothing else runs, on a machine whose load comes and
goes). Normal and isolated rounds alternate; --big-calls sets how many
calls at large sizes a round holds, to tell a cost paid once a round (on
CUDA, the GPU switching between the two processes' contexts) from one
every call pays.
The first isolated call (the worker's start) is reported separately, and
how many calls went through the shared-memory call channel without Python
(core/isolated_call.h). The
targets: at n = 1 at most +5 us on the CPU and +10 us on an H200; at 2^28
at most 3 % on an H200 and nothing measurable on the CPU.
Writes DIR/isolated_percall.json when --out is given.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import registry


def per_call(op, args, calls: int, sync) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        op(*args)
    sync()
    return (time.perf_counter() - start) / calls


# Each kernel's arguments at size n; never zeros. scale_ runs with a = 1, so
# its argument keeps its values however many calls write it.
ARGS = {
    "axpy": lambda n, device: (torch.randn(n, device=device), torch.randn(n, device=device), 1.5),
    "scale": lambda n, device: (torch.randn(n, device=device), 1.0),
}


def same_results(kernel: str, normal, isolated, args) -> bool:
    if kernel == "scale":  # in place: the argument after the call, on copies
        by_normal, by_isolated = args[0].clone(), args[0].clone()
        normal(by_normal, 0.5)
        isolated(by_isolated, 0.5)
        return torch.equal(by_normal, by_isolated)
    return torch.equal(normal(*args), isolated(*args))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--kernel", choices=sorted(ARGS), default="axpy")
    parser.add_argument("--big-calls", type=int, default=0,
                        help="calls per round at sizes of 2^20 and more (default: --calls / 50, at least 3)")
    parser.add_argument("--out")
    options = parser.parse_args()
    torch.set_num_threads(1)
    device = options.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    kernel = options.kernel
    normal = registry.get(kernel, device=device)
    started = time.perf_counter()
    isolated = registry.get(kernel, device=device, isolate=True)
    isolated(*ARGS[kernel](1, device))
    sync()
    first = time.perf_counter() - started
    print(f"first isolated call (get + worker start + load): {first * 1e3:.1f} ms")
    rows = []
    for n in options.sizes:
        args = ARGS[kernel](n, device)
        assert same_results(kernel, normal, isolated, args), "isolated result differs"
        big = n >= 1 << 20
        calls = (options.big_calls or max(3, options.calls // 50)) if big else options.calls
        rounds = min(options.rounds, 10) if big else options.rounds
        for op in (normal, isolated):  # warm up
            per_call(op, args, calls, sync)
        times = {"normal": [], "isolated": []}
        gc.disable()
        for r in range(rounds):
            order = ("normal", "isolated") if r % 2 == 0 else ("isolated", "normal")
            for name in order:
                times[name].append(per_call(normal if name == "normal" else isolated, args, calls, sync))
        gc.enable()
        single = {"normal": [], "isolated": []}  # each call timed alone: the median call, without the tail
        for _ in range(rounds * 20 if not big else rounds):
            for name, op in (("normal", normal), ("isolated", isolated)):
                start = time.perf_counter()
                op(*args)
                sync()
                single[name].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        extra = statistics.median(i - n_ for i, n_ in zip(times["isolated"], times["normal"]))
        row = {"kernel": kernel, "device": device, "n": n, "calls_per_round": calls,
               "normal_us": med["normal"] * 1e6, "isolated_us": med["isolated"] * 1e6,
               "extra_us": extra * 1e6, "overhead_percent": 100 * extra / med["normal"],
               "normal_single_median_us": statistics.median(single["normal"]) * 1e6,
               "isolated_single_median_us": statistics.median(single["isolated"]) * 1e6,
               "normal_best_us": min(times["normal"]) * 1e6, "isolated_best_us": min(times["isolated"]) * 1e6}
        rows.append(row)
        print(f"{kernel} {device} n={n:>10} ({calls} calls a round): normal {row['normal_us']:9.1f} us  "
              f"isolated {row['isolated_us']:9.1f} us  "
              f"extra {row['extra_us']:8.1f} us  ({row['overhead_percent']:.1f} %);  one call alone, median: "
              f"normal {row['normal_single_median_us']:.1f} us, isolated {row['isolated_single_median_us']:.1f} us;  "
              f"best round: normal {row['normal_best_us']:.1f} us, isolated {row['isolated_best_us']:.1f} us")
    from registry.isolation.supervisor import SUPERVISOR

    worker = SUPERVISOR.workers.get(("plain", device))
    channel = worker.channel if worker is not None else None
    print(f"isolated calls: {worker.calls if worker else 0}, through the call channel without Python: "
          f"{channel.calls if channel is not None else 0}")
    print(registry.status(kernel, device=device))
    if options.out:
        Path(options.out).mkdir(parents=True, exist_ok=True)
        Path(options.out, "isolated_percall.json").write_text(json.dumps({"first_call_s": first, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
