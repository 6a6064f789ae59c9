"""Timing device work honestly: warm up, synchronize, take medians."""
from __future__ import annotations

import statistics
import time

import torch


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_seconds(op, input_sets: list, device: str, repeats: int, warmup: int = 3) -> float:
    for i in range(warmup):
        op(*input_sets[i % len(input_sets)])
    _sync(device)
    times = []
    if device == "cuda":
        for i in range(max(1, repeats)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            op(*input_sets[i % len(input_sets)])
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for i in range(max(1, repeats)):
            start = time.perf_counter()
            op(*input_sets[i % len(input_sets)])
            times.append(time.perf_counter() - start)
    return statistics.median(times)




def cuda_median_ms(fn, iters: int = 20, reps: int = 9) -> float:
    """Median over `reps` of the mean time of `iters` back-to-back calls of
    `fn`, from CUDA events: launch gaps hidden the way a real loop hides them."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) / iters)
    return statistics.median(times)
