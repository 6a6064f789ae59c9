"""Timing device work honestly: warm up, synchronize, take medians."""
from __future__ import annotations

import statistics
import time

import torch


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_seconds(op, input_sets: list, device: str, repeats: int, warmup: int = 3,
                   keyword_sets: list[dict] | None = None) -> float:
    """keyword_sets: each input set's keyword arguments (an op's keyword-only
    ones), passed as such; none when not given."""
    keywords = keyword_sets or [{}] * len(input_sets)
    for i in range(warmup):
        op(*input_sets[i % len(input_sets)], **keywords[i % len(input_sets)])
    _sync(device)
    times = []
    if device == "cuda":
        for i in range(max(1, repeats)):
            args, kwargs = input_sets[i % len(input_sets)], keywords[i % len(input_sets)]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            op(*args, **kwargs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for i in range(max(1, repeats)):
            args, kwargs = input_sets[i % len(input_sets)], keywords[i % len(input_sets)]
            start = time.perf_counter()
            op(*args, **kwargs)
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


def graph_median_ms(fn, replays: int = 20) -> float:
    """cuda_median_ms of one call of `fn` captured in a CUDA graph and replayed:
    the time of its kernels alone, with no host work between them."""
    side = torch.cuda.Stream()  # warm-up before capture, on a side stream as capture wants
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    ms = cuda_median_ms(graph.replay, iters=replays)
    del graph
    return ms
