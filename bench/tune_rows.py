"""registry.tune on the library's row kernels, from an empty cache and cached,
with an exhaustive re-measure checking what it chose.

    python3 bench/tune_rows.py --out DIR [--kernels softmax rmsnorm ...] [--dtype float32]
                               [--shapes 4096x256,1024x32768,65536x1024] [--device cuda]

Per kernel (default: softmax, rmsnorm, layernorm, rowmax, quantize; 24 configs
each, kreg::plan_rows's packs per thread x block size), at shapes other than
the hand-tuned one (default 4096 x 256, 1024 x 32768, 65536 x 1024):

  empty    registry.tune in this process on an empty registry cache and an
           empty ccache (REGISTRY_CACHE_DIR and CCACHE_DIR set to new temporary
           folders before the first get): every config compiled, checked,
           timed. The op's binding (one per signature) is built by a plain get
           first and timed apart ("binding"): it is not part of tuning, and a
           user who ever used the kernel has it.
  cached   registry.tune again with the same arguments: the table covers every
           case, so nothing is built or measured; and in a fresh process
           (import, get, tune), which loads the winners' cached libraries.
  re-measure  every config timed again at every shape, as tune times it, in
           5 interleaved rounds (the median of the round medians); per shape
           the chosen config's time against the best (target: within 3 %)
           and the default config's (tuned speed-up over the default).
  per call the tuned handle (its launcher table routed: the binding picks the
           winner per call) against a snapshot of it with the default
           config's unrouted table, at n = 1 (1 x 1), 100 interleaved rounds
           of 1000 calls; and a second untuned snapshot against the first
           (A/A), what two equal handles differ by in the same run.

Writes DIR/tune_rows.md and DIR/tune_rows.json, and DIR/tune_<kernel>.png (the result's plot).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
KERNELS = ["softmax", "rmsnorm", "layernorm", "rowmax", "quantize"]
SHAPES = [(4096, 256), (1024, 32768), (65536, 1024)]


def shape_text(shape) -> str:
    return "x".join(map(str, shape))


def measure(name: str, shapes, dtype: str, device: str, out: Path) -> dict:
    """One kernel: empty, cached, fresh-process cached, re-measure, per call. registry is imported."""
    import registry

    t0 = time.perf_counter()
    registry.get(name, device=device)
    binding_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = registry.tune(name, shapes=shapes, dtypes=[dtype], device=device)
    empty_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = registry.tune(name, shapes=shapes, dtypes=[dtype], device=device)
    cached_s = time.perf_counter() - t0
    fresh_s = fresh_process_tune(name, shapes, dtype, device)
    try:
        first.plot().savefig(out / f"tune_{name}.png", dpi=110)
    except ImportError:  # no matplotlib: the table is the result
        pass
    remeasured = exhaustive(name, shapes, dtype, device)
    per_shape = []
    for shape in shapes:
        label = shape_text(shape)
        rounds = remeasured[label]
        times = {config: statistics.median(v) for config, v in rounds.items()}
        chosen = first.winners.get((first.table["op"].iloc[0], dtype, label))
        best = min(times, key=times.get)
        default = next(iter(times))  # the default config comes first
        chosen_us = times.get(chosen, float("nan"))
        per_shape.append(dict(
            shape=label, chosen=chosen, chosen_us=chosen_us, best=best, best_us=times[best],
            default=default, default_us=times[default], within_best=chosen_us / times[best],
            default_rounds_us=rounds[default], best_rounds_us=rounds[best],
            tuned_over_default=times[default] / chosen_us))
    return dict(kernel=name, dtype=dtype, device=device, configs=int(first.table["config"].nunique()),
                dropped=first.dropped, compiled=first.compiled, binding_s=binding_s, empty_s=empty_s,
                empty_build_s=first.build_seconds, cached_s=cached_s, cached_note=str(again.rows[0]["note"]),
                fresh_process=fresh_s, shapes=per_shape, percall=percall(name, dtype, device))


def exhaustive(name: str, shapes, dtype: str, device: str, rounds: int = 5, repeats: int = 20,
               only: dict | None = None, seed: int = 5000) -> dict:
    """Every config that passed, timed again at every shape the way tune times
    (fresh inputs, L2 flushed on CUDA), `rounds` rounds in turn (the order
    flipped every round): {shape: {config: [each round's median, us]}}.
    only: {shape text: config labels} to time just those there."""
    import torch

    from registry import _core, dtypes as dtype_table
    from registry.resolve import find
    from registry.tuning import search as tuning, timing as tune_timing

    manifest = find(name)
    backend = device
    # The builds tune made for `dtype` (only its own units where the kernel has one per dtype).
    configs = manifest.tune.enumerate()
    by_config = tuning.build_configs(name, backend, manifest, configs, dtypes=[dtype])
    built = {label: ops for label, ops in ((_core.config_label(c), by_config.ops_for(_core.config_label(c), dtype))
                                           for c in configs) if ops is not None}
    spec = next(s for s in manifest.ops if s.name not in {o.backward for o in manifest.ops if o.backward})
    torch_dtype = dtype_table.torch_dtype(dtype)
    flush = tune_timing.L2Flush() if backend == "cuda" else None
    out = {}
    for shape in shapes:
        shape_of = tuning.shape_for(spec, shape)
        labels = [label for label in built if only is None or label in only.get(shape_text(shape), ())]
        samples = {label: [] for label in labels}
        for r in range(rounds):
            for i, label in enumerate(labels[:: 1 if r % 2 == 0 else -1]):
                op = built[label][spec.name]
                try:
                    seconds, _ = tune_timing.median_time(op, spec, torch_dtype, backend, shape_of, {}, repeats,
                                                         flush, seed + 100 * r + i)
                except Exception:  # a faulting config: tune dropped it too
                    samples.pop(label, None)
                    continue
                if label in samples:
                    samples[label].append(seconds * 1e6)
        out[shape_text(shape)] = {label: v for label, v in samples.items() if v}
        if backend == "cuda":
            torch.cuda.synchronize()
    return out


def fresh_process_tune(name: str, shapes, dtype: str, device: str) -> dict:
    """A new process, everything cached: seconds of `import registry` (torch
    comes with the first get), the get (which loads the winners), and the tune."""
    script = (f"import time; t0 = time.perf_counter(); import registry; t1 = time.perf_counter(); "
              f"registry.get({name!r}, device={device!r}); t2 = time.perf_counter(); "
              f"r = registry.tune({name!r}, shapes={list(shapes)!r}, dtypes=[{dtype!r}], device={device!r}); "
              f"t3 = time.perf_counter(); print(t1 - t0, t2 - t1, t3 - t2); "
              f"assert r.rows[0]['note'].startswith('cached'), r")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy())
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    import_s, get_s, tune_s = (float(v) for v in out.stdout.split()[-3:])
    return dict(import_s=import_s, get_s=get_s, tune_s=tune_s)


def percall(name: str, dtype: str, device: str, rounds: int = 100, calls: int = 1000) -> dict:
    """The tuned handle (dispatch on dtype and shape) against its untuned snapshot, at 1 x 1.
    Both run the same default launcher there (1 x 1 is in no tuned bucket), so
    what differs is the route lookup, a few ns; 30 rounds left ~2 % of launch
    noise between two equal handles on the H200, hence 100."""
    import torch

    import registry
    from registry import _core
    from registry.notebook.checks import make_args

    from registry.tuned import untuned_table

    op = registry.get(name, device=device)
    op = op if hasattr(op, "_fast") else next(iter(op.ops.values()))
    plain = op.snapshot()  # the same code with the default config's (unrouted) launcher table
    plain._swap(plain._fn, untuned_table(op), op.backend, op.key, fast=op._fast_entry)
    spec = op._spec
    args = make_args(spec, 1, getattr(torch, dtype), device, torch.Generator(device=device).manual_seed(0), {})
    tuned = op._table.route_count > 0
    again = plain.snapshot()  # A/A: a second untuned handle, what two equal handles differ by here
    contenders = [("tuned", op), ("untuned", plain), ("untuned again", again)]
    times = {label: [] for label, _ in contenders}
    for _, contender in contenders:
        for _ in range(200):
            contender(*args)
    for r in range(rounds):
        order = contenders[r % 3:] + contenders[:r % 3]  # each one first, second and last in turn
        for label, contender in order[:: 1 if r % 2 == 0 else -1]:
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                contender(*args)
            if device == "cuda":
                torch.cuda.synchronize()
            times[label].append((time.perf_counter() - t0) / calls * 1e6)
    tuned_us, untuned_us, again_us = (statistics.median(times[label]) for label, _ in contenders)
    return dict(dispatching=tuned, tuned_us=tuned_us, untuned_us=untuned_us, ratio=tuned_us / untuned_us,
                again_us=again_us, aa_ratio=again_us / untuned_us, bucket=_core.shape_bucket([1, 1]))


def report(results: list[dict], machine: str, command: str) -> str:
    lines = [f"# registry.tune: {', '.join(r['kernel'] for r in results)}", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine}", "", f"    {command}", "",
             "| kernel | dtype | configs | compiled | dropped | binding s | tune, empty cache s | of which builds s "
             "| tune, cached s | fresh process: import s | get s | tune s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['kernel']} | {r['dtype']} | {r['configs']} | {r['compiled']} | {len(r['dropped'])} "
                     f"| {r['binding_s']:.2f} | {r['empty_s']:.2f} | {r['empty_build_s']:.2f} | {r['cached_s']:.4f} "
                     f"| {r['fresh_process']['import_s']:.3f} | {r['fresh_process']['get_s']:.3f} "
                     f"| {r['fresh_process']['tune_s']:.3f} |")
    lines += ["", "Re-measure (every config timed again): the chosen config against the best and the default.", "",
              "| kernel | shape | chosen | chosen us | best | best us | chosen / best | default us "
              "| tuned speed-up over default |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for s in r["shapes"]:
            lines.append(f"| {r['kernel']} | {s['shape']} | {s['chosen']} | {s['chosen_us']:.2f} | {s['best']} "
                         f"| {s['best_us']:.2f} | {s['within_best']:.3f} | {s['default_us']:.2f} "
                         f"| {s['tuned_over_default']:.3f} |")
    lines += ["", "Per call at n = 1 (1 x 1): the tuned handle against its untuned snapshot, median of rounds; "
              "A/A: a second untuned snapshot against the first, the noise between two equal handles.", "",
              "| kernel | dispatching | tuned us | untuned us | tuned / untuned | A/A |", "|---|---|---|---|---|---|"]
    for r in results:
        p = r["percall"]
        lines.append(f"| {r['kernel']} | {p['dispatching']} | {p['tuned_us']:.3f} | {p['untuned_us']:.3f} "
                     f"| {p['ratio']:.3f} | {p['aa_ratio']:.3f} |")
    for r in results:
        for d in r["dropped"]:
            lines.append(f"\ndropped ({r['kernel']}): {d}")
    return "\n".join(lines) + "\n"


def measure_and_report(names: list[str], shapes, dtype: str, device: str, out: Path, stem: str) -> None:
    """measure() each kernel (its result printed as one JSON line as soon as it
    is in), then the report, printed and written to out/<stem>.md, and every
    result to out/<stem>.json."""
    results = []
    for name in names:
        results.append(measure(name, shapes, dtype, device, out))
        print(json.dumps(results[-1], default=str), flush=True)
    if device == "cuda":
        import torch

        where = torch.cuda.get_device_name()
    else:
        where = f"CPU {platform.processor() or platform.machine()}"
    text = report(results, f"{where}, {os.cpu_count()} cores", "python3 " + " ".join(sys.argv))
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)


def fresh_caches() -> None:
    """An empty registry cache and an empty ccache, before registry is imported."""
    os.environ["REGISTRY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tune-cache-")
    os.environ["CCACHE_DIR"] = tempfile.mkdtemp(prefix="tune-ccache-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kernels", nargs="*", default=KERNELS)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--shapes", default=",".join(shape_text(s) for s in SHAPES))
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fresh_caches()
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    measure_and_report(args.kernels, shapes, args.dtype, args.device, args.out, "tune_rows")


if __name__ == "__main__":
    main()
