"""How registry.tune times a config: fresh inputs per config (a new random
draw); the median of `repeats` samples after warm-up. Every config is timed
in two sweeps, the second in reverse order (first_pass); then a final round
among the closest configs decides (final_round).

A GPU's clock drifts while a tune runs: a GEMM at full power heats the chip
and its clock drops (in a tune of kernels/gemm on the H200 the finalists at
8192^3 read 13 % or more slower in the final round than in the first pass,
and a config timed in the first pass only was chosen over them). So what is
compared was measured side by side: the first pass's sweeps in opposite orders, the
final round's times per round (each round's level divided out), and only the
final round's configs are chosen from.

On CUDA a sample is device time between two events, with L2 flushed before it
(a buffer twice L2's size is written, so no config runs on data the previous
one left warm). A call much shorter than BATCH_TARGET_US is timed up to
MAX_BATCH calls per event pair, each on its own input set, all cold since the
flush: an event pair resolves about half a microsecond and adds its own device
time (on an H200 the row kernels at 4096 x 256 read 6.1-6.9 us one call a
pair, 4.1-5.4 us in batches), more than their configs differ there. The stream
is held by a spin kernel (torch.cuda._sleep) while the host queues the batch
(nvbench's blocking kernel), so that the device runs the calls back to back
and not at the host's pace; a sample the device began before the host had
queued it all is dropped and the hold doubled.

On the CPU a sample is perf_counter around one call, two input sets
rotating, and a measurement is cut to about MEASURE_BUDGET_S of calls (at
least MIN_REPEATS)."""
from __future__ import annotations

import math
import statistics
import time

FINAL_ROUND_MARGIN = 0.10  # configs this close to the fastest are timed again before one is chosen
FINAL_ROUND_SIZE = 6       # at most this many (and the default): at 4096^3, 9 of gemm's 24 read within 3 %
FINAL_ROUNDS = 5
FIRST_PASS_SWEEPS = 2      # the first pass's sweeps, each in the other order
WARM_UP_S = 0.3            # CUDA: the default config runs this long before a case's first sample
MEASURE_BUDGET_S = 0.05  # CPU: the repeats of one measurement are cut to about this long ...
MIN_REPEATS = 5          # ... but never below this many
BATCH_TARGET_US = 200.0  # CUDA: calls shorter than this are timed several per event pair ...
MAX_BATCH = 32           # ... at most this many ...
BATCH_BYTES = 2 << 30    # ... on input sets of at most this many bytes in all
HOLD_US_PER_CALL = 10.0  # the first hold of the stream per queued call (doubled when short, ...
MAX_HOLD_DOUBLINGS = 4   # ... at most this often: then samples are kept as they come)
SPIN_HZ = 2.0e9          # clock the hold's cycles are counted at (a slower clock holds longer)


def median_time(op, spec, torch_dtype, backend, shape_of, args, repeats, flush, seed: int) -> tuple[float, int]:
    """(median seconds, bytes moved per call) on fresh inputs (drawn for this config: `seed`)."""
    import torch

    from registry.notebook import checks

    generator = torch.Generator(device=backend).manual_seed(seed)

    def new_set():
        return checks.make_args(spec, 0, torch_dtype, backend, generator, args, shape_of=shape_of)

    sets = [new_set() for _ in range(1 if backend == "cuda" else 2)]
    outs = checks.results(spec, sets[0], op(*sets[0]))
    moved = sum(a.numel() * a.element_size() for a in sets[0] if isinstance(a, torch.Tensor))
    moved += sum(o.numel() * o.element_size() for o in outs)
    del outs
    for i in range(3):
        op(*sets[i % len(sets)])
    if backend == "cuda":
        return statistics.median(_cuda_samples(op, sets[0], new_set, moved, repeats, flush)), moved
    # long calls: fewer repeats, so one measurement stays near MEASURE_BUDGET_S
    t0 = time.perf_counter()
    op(*sets[0])
    repeats = max(MIN_REPEATS, min(repeats, int(MEASURE_BUDGET_S / max(time.perf_counter() - t0, 1e-9))))
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        op(*sets[i % 2])
        times.append(time.perf_counter() - t0)
    return statistics.median(times), moved


def _cuda_samples(op, first_set, new_set, moved: int, repeats: int, flush) -> list[float]:
    """`repeats` samples of seconds per call on CUDA, each the mean of a batch
    of cold calls (module docstring)."""
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    flush()
    begin.record()
    op(*first_set)
    end.record()
    end.synchronize()
    one_call_us = begin.elapsed_time(end) * 1e3
    batch = max(1, min(MAX_BATCH, math.ceil(BATCH_TARGET_US / max(one_call_us, 0.1)), BATCH_BYTES // max(moved, 1)))
    hold = getattr(torch.cuda, "_sleep", None)  # private to torch: without it, one call per event pair
    if hold is None:
        batch = 1
    sets = [first_set] + [new_set() for _ in range(batch - 1)]
    hold_us = HOLD_US_PER_CALL * batch if batch > 1 else 0.0
    samples, doublings = [], 0
    while len(samples) < repeats:
        flush()
        if hold_us:
            hold(int(hold_us * 1e-6 * SPIN_HZ))
        begin.record()
        outs = [op(*s) for s in sets]  # kept until the batch ends: no call writes where the one before did
        end.record()
        late = hold_us and begin.query()  # the device got to the batch before the host had queued it all
        end.synchronize()
        del outs
        if late and doublings < MAX_HOLD_DOUBLINGS:
            doublings += 1
            hold_us *= 2
            continue
        samples.append(begin.elapsed_time(end) / 1e3 / batch)
    return samples


class L2Flush:
    """Writes a buffer twice the GPU's L2 size: what the next call reads comes from DRAM."""

    def __init__(self):
        import torch

        size = 2 * torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.buffer = torch.empty(max(size, 1 << 20), dtype=torch.uint8, device="cuda")

    def __call__(self):
        self.buffer.zero_()



def first_pass(rows, ops: dict, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels) -> None:
    """Each passing row's config (ops: label -> op) timed FIRST_PASS_SWEEPS
    times, the order reversed each sweep; its time the mean of its sweeps'
    medians: a clock that drifts through the pass slows the late configs of
    one sweep and the early ones of the other alike. On CUDA the GPU first
    runs the default config for WARM_UP_S, so the first configs are not timed
    on an idle, cool GPU."""
    passing = [r for r in rows if r["passed"]]
    if not passing:
        return
    if backend == "cuda":
        warm_up(ops[passing[0]["config"]], spec, torch_dtype, shape_of, args)
    seconds, moved = {r["config"]: [] for r in passing}, {}
    for sweep in range(FIRST_PASS_SWEEPS):
        for r in passing[::1 if sweep % 2 == 0 else -1]:
            label = r["config"]
            time_s, moved[label] = median_time(ops[label], spec, torch_dtype, backend, shape_of, args, repeats, flush,
                                               1 + labels.index(label) + 100 * sweep)
            seconds[label].append(time_s)
    for r in passing:
        mean_s = statistics.fmean(seconds[r["config"]])
        r["median_us"], r["gbps"] = mean_s * 1e6, moved[r["config"]] / mean_s / 1e9


def warm_up(op, spec, torch_dtype, shape_of, args) -> None:
    import torch

    from registry.notebook import checks

    inputs = checks.make_args(spec, 0, torch_dtype, "cuda", torch.Generator(device="cuda").manual_seed(0), args,
                              shape_of=shape_of)
    end = time.perf_counter() + WARM_UP_S
    while time.perf_counter() < end:
        for _ in range(8):
            op(*inputs)
        torch.cuda.synchronize()


def final_round(rows, ops: dict, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels) -> None:
    """The configs within FINAL_ROUND_MARGIN of the fastest (at most
    FINAL_ROUND_SIZE, and the default; ops: label -> op) timed again,
    FINAL_ROUNDS rounds in turn, and marked (round_us): only they can be
    chosen, on these times, never on a first-pass time taken earlier (on a
    cooler GPU). Each round's times are divided by that round's median over
    the finalists (and multiplied by the rounds' median of those): a round
    the GPU ran slower shifts every finalist alike and moves none against
    another. What decides is the median of a config's rounds so levelled.
    The first pass is left out: it is what made these the finalists, so
    among 24 configs the luckiest draws are in it."""
    timed = sorted((r for r in rows if r["passed"] and r.get("median_us")), key=lambda r: r["median_us"])
    if len(timed) < 2:
        return
    close = [r for r in timed if r["median_us"] <= timed[0]["median_us"] * (1 + FINAL_ROUND_MARGIN)]
    finalists = close[:FINAL_ROUND_SIZE] + [r for r in timed if r["config"] == labels[0] and r not in close[:FINAL_ROUND_SIZE]]
    if len(finalists) < 2:
        return
    samples = {r["config"]: [] for r in finalists}
    for round_ in range(FINAL_ROUNDS):
        for r in finalists[::1 if round_ % 2 else -1]:
            seconds, _ = median_time(ops[r["config"]], spec, torch_dtype, backend, shape_of, args, repeats, flush,
                                     1000 * (round_ + 1) + labels.index(r["config"]))
            samples[r["config"]].append(seconds * 1e6)
    levelled = levelled_rounds(samples)
    for r in finalists:
        moved = r["gbps"] * r["median_us"] / 1e6 * 1e9
        r["round_us"] = levelled[r["config"]]  # each round's, in order
        r["median_us"] = statistics.median(levelled[r["config"]])
        r["gbps"] = moved / (r["median_us"] / 1e6) / 1e9
        r["note"] = f"final round: median of {FINAL_ROUNDS} rounds, each levelled"


def levelled_rounds(samples: dict[str, list[float]]) -> dict[str, list[float]]:
    """{config: each round's time} with each round's level divided out: the
    round's median over the configs, scaled to the rounds' median level."""
    rounds = len(next(iter(samples.values())))
    levels = [statistics.median(times[i] for times in samples.values()) for i in range(rounds)]
    overall = statistics.median(levels)
    return {config: [t * overall / level for t, level in zip(times, levels)] for config, times in samples.items()}
