"""How registry.tune times a config: fresh inputs per config (a new random
draw), on CUDA CUDA events around each call with L2 flushed before it (a
buffer twice L2's size is written, so no config runs on data the previous one
left warm), on the CPU perf_counter with two input sets rotating; the median
of `repeats` calls after warm-up (on the CPU at most about MEASURE_BUDGET_S
of calls, and at least MIN_REPEATS). Then a final round among the closest
configs decides (final_round)."""
from __future__ import annotations

import statistics
import time

FINAL_ROUND_MARGIN = 0.10  # configs this close to the fastest are timed again before one is chosen
FINAL_ROUND_SIZE = 4
FINAL_ROUNDS = 4
MEASURE_BUDGET_S = 0.05  # CPU: the repeats of one measurement are cut to about this long ...
MIN_REPEATS = 5          # ... but never below this many


def median_time(op, spec, torch_dtype, backend, shape_of, args, repeats, flush, seed: int) -> tuple[float, int]:
    """(median seconds, bytes moved per call) on fresh inputs (drawn for this config: `seed`)."""
    import torch

    from registry.notebook import checks

    generator = torch.Generator(device=backend).manual_seed(seed)
    sets = [checks.make_args(spec, 0, torch_dtype, backend, generator, args, shape_of=shape_of)
            for _ in range(1 if backend == "cuda" else 2)]
    outs = checks.results(spec, sets[0], op(*sets[0]))
    moved = sum(a.numel() * a.element_size() for a in sets[0] if isinstance(a, torch.Tensor))
    moved += sum(o.numel() * o.element_size() for o in outs)
    del outs
    for i in range(3):
        op(*sets[i % len(sets)])
    if backend != "cuda":  # long calls: fewer repeats, so one measurement stays near MEASURE_BUDGET_S
        t0 = time.perf_counter()
        op(*sets[0])
        repeats = max(MIN_REPEATS, min(repeats, int(MEASURE_BUDGET_S / max(time.perf_counter() - t0, 1e-9))))
    times = []
    if backend == "cuda":
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for begin, end in events:
            flush()
            begin.record()
            op(*sets[0])
            end.record()
        torch.cuda.synchronize()
        times = [begin.elapsed_time(end) / 1e3 for begin, end in events]
    else:
        for i in range(repeats):
            t0 = time.perf_counter()
            op(*sets[i % 2])
            times.append(time.perf_counter() - t0)
    return statistics.median(times), moved



class L2Flush:
    """Writes a buffer twice the GPU's L2 size: what the next call reads comes from DRAM."""

    def __init__(self):
        import torch

        size = 2 * torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.buffer = torch.empty(max(size, 1 << 20), dtype=torch.uint8, device="cuda")

    def __call__(self):
        self.buffer.zero_()



def final_round(rows, built, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels) -> None:
    """The configs within FINAL_ROUND_MARGIN of the fastest (at most
    FINAL_ROUND_SIZE, and the default) timed again, FINAL_ROUNDS times in
    turn: what decides is the median of their medians, so that one noisy
    first measurement neither crowns nor drops a config."""
    timed = sorted((r for r in rows if r["passed"] and r.get("median_us")), key=lambda r: r["median_us"])
    if len(timed) < 2:
        return
    close = [r for r in timed if r["median_us"] <= timed[0]["median_us"] * (1 + FINAL_ROUND_MARGIN)]
    finalists = close[:FINAL_ROUND_SIZE] + [r for r in timed if r["config"] == labels[0] and r not in close[:FINAL_ROUND_SIZE]]
    if len(finalists) < 2:
        return
    samples = {r["config"]: [r["median_us"]] for r in finalists}
    for round_ in range(FINAL_ROUNDS):
        for r in finalists[::1 if round_ % 2 else -1]:
            op = built[r["config"]][spec.name]
            seconds, _ = median_time(op, spec, torch_dtype, backend, shape_of, args, repeats, flush,
                               1000 * (round_ + 1) + labels.index(r["config"]))
            samples[r["config"]].append(seconds * 1e6)
    for r in finalists:
        moved = r["gbps"] * r["median_us"] / 1e6 * 1e9
        r["round_us"] = samples[r["config"]]  # the first measurement, then each round's, in order
        r["median_us"] = statistics.median(samples[r["config"]])
        r["gbps"] = moved / (r["median_us"] / 1e6) / 1e9
        r["note"] = f"final round: median of {len(samples[r['config']])} medians"
