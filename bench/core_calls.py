"""How many calls `get` makes into the C++ core (`registry._core`).

    python bench/core_calls.py [--device cpu|cuda] [--out bench/results]

Three cases, each in a new process on a scratch copy of kernels/axpy: a cold
`get` (empty cache: plan, build, load), a fresh process whose every artifact
is cached, and the hot path (a second `get` in the same process; its time is
also taken without the profiler, the median of 200 batches of 50 gets, and
so is its one core call alone: one read() of the change watch once the
stamps are watched, core/change_watch.h; beside it, what a stat() of each
file costs, the check when the watch saw an event). Calls are
counted with a profile hook, which sees every call of a built-in function, so
the package needs no counter of its own: a call counts when the function or
the object it is bound to comes from `registry._core`.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bench_run import CHECKOUT, parse_args, run_child, run_header, write_results

CHILD = r"""
import collections, json, sys, threading, time
import torch
import registry
from registry import _core

counts = collections.Counter()

def core_name(fn):
    owner = getattr(fn, "__self__", None)
    if getattr(fn, "__module__", None) == "registry._core":
        return fn.__name__
    if owner is not None and type(owner).__module__ == "registry._core":
        return f"{type(owner).__name__}.{fn.__name__}"
    if owner is _core:
        return fn.__name__
    return None

def hook(frame, event, arg):
    # The cache cap runs on its own worker after the get has its result
    # (cache_cap.collect_garbage_soon): beside the caller, not on its path.
    if event == "c_call" and not threading.current_thread().name.startswith("kreg-cache-cap"):
        name = core_name(arg)
        if name:
            counts[name] += 1

def counted(fn):
    counts.clear()
    sys.setprofile(hook)
    threading.setprofile(hook)  # builds run in worker threads
    start = time.perf_counter()
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return {"calls": sum(counts.values()), "seconds": time.perf_counter() - start, "by_function": dict(counts)}

device = sys.argv[1]
first = counted(lambda: registry.get("axpy", device=device))
outcome = registry.status("axpy", device=device).outcome
hot = counted(lambda: registry.get("axpy", device=device))
# The hot path's own time, without the profiler, and its floor, the one core
# call alone (a read() of the change watch, or a stat() per file the build
# read where the files cannot be watched): the median of 200 batches of 50
# calls each, the three taken in turn so that all see the same load.
stamps = registry.state.STATE.find("axpy", device).stamps
gets, calls, stats = [], [], []
for _ in range(200):
    start = time.perf_counter()
    for _ in range(50):
        registry.get("axpy", device=device)
    gets.append((time.perf_counter() - start) / 50)
    start = time.perf_counter()
    for _ in range(50):
        stamps.unchanged()
    calls.append((time.perf_counter() - start) / 50)
    start = time.perf_counter()
    for _ in range(50):
        stamps.check()  # a stat() per file; hashes only a file whose stat moved (none here)
    stats.append((time.perf_counter() - start) / 50)
hot["unprofiled_seconds"] = sorted(gets)[len(gets) // 2]
hot["unchanged_call_seconds"] = sorted(calls)[len(calls) // 2]
hot["files_stat"] = len(stamps)
hot["watched"] = stamps.watched
hot["stat_each_file_seconds"] = sorted(stats)[len(stats) // 2]
around = sorted(g - c for g, c in zip(gets, calls))  # what get adds around the call
hot["around_call_seconds"] = around[len(around) // 2]
print(json.dumps({"first": first, "hot": hot, "outcome": outcome}))
"""


def main() -> None:
    args = parse_args()
    device = args.device
    work = Path(tempfile.mkdtemp(prefix="core-calls-"))
    shutil.copytree(CHECKOUT / "kernels" / "axpy", work / "kernels" / "axpy")
    env = dict(os.environ, REGISTRY_KERNELS_PATH=str(work / "kernels"), REGISTRY_CACHE_DIR=str(work / "cache"))
    cold = run_child(CHILD, device, env=env)
    cached = run_child(CHILD, device, env=env)
    assert cold["outcome"] == "compiled" and cached["outcome"] in ("cache", "in-process"), (cold, cached)
    result = {
        **run_header(device, f"python bench/core_calls.py --device {device}"),
        "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        "cold_get": cold["first"], "fresh_process_cached_get": cached["first"], "hot_get": cached["hot"],
    }
    figures = (f"calls into _core: cold get {cold['first']['calls']}, "
               f"fresh-process cached get {cached['first']['calls']}, hot get {cached['hot']['calls']} "
               f"({cached['hot']['unprofiled_seconds'] * 1e6:.1f} us per get unprofiled, "
               f"{cached['hot']['seconds'] * 1e6:.0f} us under the profiler, the first, which adds the change watch; "
               f"the core call alone, "
               + ("one read() of the change watch" if cached['hot']['watched']
                  else "not watched: a stat() of each file")
               + f", {cached['hot']['unchanged_call_seconds'] * 1e6:.1f} us, where a stat() of each of the "
               f"{cached['hot']['files_stat']} files takes {cached['hot']['stat_each_file_seconds'] * 1e6:.1f} us; "
               f"get around it {cached['hot']['around_call_seconds'] * 1e6:.1f} us); load average "
               f"{result['load_average'][0]:.2f} on {result['cpus']} CPUs")
    write_results(args.out, "core_calls", result, figures)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
