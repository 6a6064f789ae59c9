"""registry.tune: search a kernel's config space ([tune] in kernel.toml) and
keep the winner per (op, dtype, shape bucket, device arch).

    result = registry.tune("softmax", shapes=[(4096, 256), (65536, 1024)])
    result                        # config x shape: time, GB/s, speed-up over the default
    result.plot()                 # speed-up per config, one line per shape
    registry.status("softmax")    # "tuned table: in use ..."

  build    every config the rule accepts is its own kernel library (its
           defines are in the flags its key covers), built side by side in
           threads, at most one per core; a cached config costs a lookup.
           A config that fails to build is dropped and reported.
  check    each config runs on the same random inputs (never zeros) per
           (op, dtype, shape), compared with the manifest's float64 reference
           (computed once; checks.py's tolerances and rules). A config that
           computes wrong, or whose launcher returns an error, is dropped and
           reported, never timed or chosen. No process isolation: a config
           that crashes the process (a segfault) takes the notebook with it.
  time     fresh inputs per config (a new random draw); on CUDA, CUDA events
           around each call, with L2 flushed before it (a buffer twice L2's
           size is written), so no config runs on data the previous one left
           warm; on the CPU, perf_counter with two input sets rotating.
           The median of `repeats` calls after warm-up (on the CPU at most
           about 50 ms of calls, and at least 5).
  choose   per (op, dtype, shape): the configs within 10 % of the fastest
           (at most 4) and the default are timed again, 4 rounds in turn, each
           config's time the median of its round medians; the fastest wins
           unless it is within MIN_GAIN of the default's time (then the
           default: a winner must be measurably better).
  keep     the winners go into the tuned table of this kernel version in the
           cache (format: registry/core/tuned_table.h) and the team cache when
           one is set; this process's op dispatches to them at once.

`shapes` are the first Tensor argument's shapes, mapped onto the op's `sweep`
sizes in the manifest (x = "[rows, cols]": (4096, 256) is rows 4096, cols 256);
without a sweep, each Tensor gets the shape.
"""
from __future__ import annotations

import os
import statistics
import time

from registry import _core
from registry.errors import UsageError

MIN_GAIN = 0.01          # a config must beat the default by 1 % to be chosen over it
DEFAULT_REPEATS = 20
FINAL_ROUND_MARGIN = 0.10  # configs this close to the fastest are timed again before one is chosen
FINAL_ROUND_SIZE = 4
FINAL_ROUNDS = 4
MEASURE_BUDGET_S = 0.05  # CPU: the repeats of one measurement are cut to about this long ...
MIN_REPEATS = 5          # ... but never below this many
COLUMNS = ["op", "dtype", "shape", "bucket", "config", "passed", "median_us", "gbps", "speedup", "chosen", "note"]


class TuneResult:
    """The table (`.table`, a pandas DataFrame: one row per config x shape),
    the winners, what was dropped and why, and how long each phase took."""

    def __init__(self, kernel, device, rows, winners, dropped, build_seconds, seconds, table_path, compiled):
        self.kernel, self.device, self.rows, self.winners = kernel, device, rows, winners
        self.dropped, self.build_seconds, self.seconds = dropped, build_seconds, seconds
        self.table_path, self.compiled = table_path, compiled
        self._table = None

    @property
    def table(self):
        """The rows as a pandas DataFrame (pandas is imported on first use: a cached tune needs none)."""
        if self._table is None:
            import pandas as pd

            self._table = pd.DataFrame(self.rows, columns=COLUMNS)
        return self._table

    def caption(self) -> str:
        configs = len({r["config"] for r in self.rows})
        return (f"tune {self.kernel} on {self.device}: {configs} configs, {len(self.dropped)} dropped, "
                f"{self.compiled} compiled, builds {self.build_seconds:.2f} s, total {self.seconds:.2f} s")

    def _repr_html_(self) -> str:
        import html

        dropped = "".join(f"<li>{html.escape(d)}</li>" for d in self.dropped)
        return (f"<p><b>{html.escape(self.caption())}</b></p>" + (f"<ul>{dropped}</ul>" if dropped else "")
                + self.table.to_html(index=False, na_rep=""))

    def __repr__(self) -> str:
        lines = [self.caption(), *(f"  dropped: {d}" for d in self.dropped)]
        lines += [f"  winner {op} {dtype} {shape}: {config}" for (op, dtype, shape), config in self.winners.items()]
        return "\n".join(lines + [self.table.to_string(index=False)])

    def plot(self, metric: str = "speedup"):
        """`metric` ("speedup", "us" or "gbps") per config, one line per (op, dtype, shape); returns the Figure."""
        import matplotlib.pyplot as plt

        column = {"speedup": "speedup", "us": "median_us", "gbps": "gbps"}.get(metric)
        if column is None:
            raise UsageError(f"metric must be 'speedup', 'us' or 'gbps', not {metric!r}")
        ran = self.table[self.table["median_us"].notna()]
        configs = list(dict.fromkeys(ran["config"]))
        fig, ax = plt.subplots(figsize=(max(6.5, 0.35 * len(configs)), 4))
        for (op, dtype, shape), rows in ran.groupby(["op", "dtype", "shape"], sort=False):
            xs = [configs.index(c) for c in rows["config"]]
            ax.plot(xs, rows[column], marker="o", label=f"{op} {dtype} {shape}")
            chosen = rows[rows["chosen"] == True]  # noqa: E712 (a pandas mask)
            ax.scatter([configs.index(c) for c in chosen["config"]], chosen[column], s=120, facecolors="none",
                       edgecolors="black")
        if metric == "speedup":
            ax.axhline(1.0, linestyle="--", color="gray", label="default config")
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel({"speedup": "speed-up over the default", "us": "median time (us)", "gbps": "GB/s"}[metric])
        ax.set_title(self.caption(), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        plt.close(fig)
        return fig


def tune(name: str, shapes=None, dtypes: list[str] | None = None, *, device: str | None = None,
         ops: list[str] | None = None, repeats: int = DEFAULT_REPEATS, args: dict | None = None,
         jobs: int | None = None, keep: bool = True, force: bool = False) -> TuneResult:
    """Search `name`'s config space at `shapes` (default: (4096, 1024)) and
    `dtypes` (default: each op's first), keep the winners; see the module doc.
    `args` sets scalar arguments by name; `jobs` bounds the parallel builds
    (default: the machine's cores); keep=False measures without writing the table.
    When this kernel version's table already has a winner for every (op,
    dtype, shape bucket) on this device, nothing is measured (the result says
    "cached"); force=True measures again."""
    import torch

    import registry
    from registry import knobs
    from registry.resolve import find, resolve
    from registry.notebook import tuned as tuned_table
    from registry.state import STATE

    start = time.perf_counter()
    registry.get(name, device=device)  # the default config, loaded (and its bindings registered)
    state = STATE.find(name, knobs.requested_device(device))
    backend, key = state.backend, state.status.key
    manifest = find(name)
    if not manifest.tunable:
        raise UsageError(f"kernel {name!r} has no config space: add a [tune] table to {manifest.file}, e.g.\n"
                         f"  [tune]\n  params = {{ THREADS = [256, 128, 512] }}\n"
                         f"and use THREADS in the kernel (#ifndef THREADS / #define THREADS 256 / #endif)")
    shapes = [tuple(s) for s in (shapes or [(4096, 1024)])]
    backwards = {spec.backward for spec in manifest.ops if spec.backward}  # tuned only when named in `ops`
    specs = [spec for spec in manifest.ops if (spec.name in ops if ops is not None else spec.name not in backwards)]
    for spec in specs:
        for dtype in dtypes or [spec.dtypes[0]]:
            if dtype not in spec.dtypes:
                raise UsageError(f"{spec.name} lists only {', '.join(spec.dtypes)} in kernel.toml, not {dtype!r}")
    if not force:
        cached = _from_table(name, backend, key, manifest, state, specs, dtypes, shapes, tuned_table, start)
        if cached is not None:
            return cached
    configs = manifest.tune.enumerate()  # the default first
    labels = [_core.config_label(c) for c in configs]
    default_label = labels[0]

    # ---- build, side by side --------------------------------------------
    build_start = time.perf_counter()
    built, dropped, compiled = build_configs(name, backend, manifest, configs, jobs)
    build_seconds = time.perf_counter() - build_start
    if default_label not in built:
        raise UsageError(f"kernel {name!r}: the default config {default_label} does not build; see above: "
                         + "; ".join(dropped))

    # ---- check, then time, per (op, dtype, shape) --------------------------
    from registry import dtypes as dtype_table
    from registry.notebook import checks

    module = checks.load_reference(manifest) if manifest.reference else None
    flush = _L2Flush() if backend == "cuda" else None
    rows, winners = [], {}
    failed = set()  # a config that failed anywhere is never chosen anywhere
    for spec in specs:
        reference_fn = getattr(module, spec.reference, None) if module is not None else None
        if reference_fn is None:
            raise UsageError(f"op {spec.name!r} has no reference function {spec.reference!r}: tuning checks every "
                             f"config against it before timing; define it in the kernel's reference module")
        for dtype in dtypes or [spec.dtypes[0]]:
            torch_dtype = dtype_table.torch_dtype(dtype)
            for shape in shapes:
                case_rows = _tune_case(spec, dtype, torch_dtype, shape, backend, built, labels, reference_fn, module,
                                       args or {}, repeats, flush, failed)
                rows += case_rows
    for row in rows:
        if not row["passed"]:
            failed.add(row["config"])
    # Choose once every case ran: a config that failed at one shape is out everywhere.
    for (op_name, dtype, shape), case in _group(rows).items():
        timed = {r["config"]: r for r in case if r["passed"] and r["config"] not in failed and r["median_us"]}
        if default_label not in timed:
            continue
        best = min(timed.values(), key=lambda r: r["median_us"])
        default_us = timed[default_label]["median_us"]
        choice = best if best["median_us"] < default_us * (1 - MIN_GAIN) else timed[default_label]
        choice["chosen"] = True
        winners[(op_name, dtype, shape)] = choice["config"]
    for label in sorted(failed):
        reasons = sorted({r["note"] for r in rows
                          if r["config"] == label and not r["passed"] and not r["note"].startswith("skipped")})
        dropped.append(f"{label}: {'; '.join(reasons)}")
    # ---- keep ---------------------------------------------------------------
    path = ""
    if keep and winners:
        path = _keep(name, backend, key, rows, winners, tuned_table)
        line = tuned_table.apply(name, backend, manifest, key, state.ops,
                                 lambda config: built[_core.config_label(config)])
        state.status.tuned = state.in_process.tuned = line
    device_label = torch.cuda.get_device_name() if backend == "cuda" else "cpu"
    return TuneResult(name, device_label, rows, winners, dropped, build_seconds, time.perf_counter() - start, path,
                      compiled)


def build_configs(name: str, backend: str, manifest, configs, jobs: int | None = None):
    """Each config's ops, built (or found cached) side by side, at most one
    build per core: ({label: ops}, [why each failed config was dropped], how
    many compiled)."""
    from concurrent.futures import ThreadPoolExecutor

    from registry.resolve import resolve

    def build(config):
        return resolve(name, backend, False, lambda _: None, _core.with_config(manifest, config))

    built, dropped, compiled = {}, [], 0
    workers = max(1, min(len(configs), jobs or os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [(_core.config_label(c), pool.submit(build, c)) for c in configs]
        for label, future in futures:
            try:
                state = future.result()
            except Exception as error:  # a config that does not build is reported, the rest go on
                dropped.append(f"{label}: build failed: {_first_line(error)}")
                continue
            built[label] = state.ops
            compiled += bool(state.status.compiled)
    return built, dropped, compiled


def _from_table(name, backend, key, manifest, state, specs, dtypes, shapes, tuned_table, start):
    """The result from the tuned table when it covers every case, else None."""
    import torch

    table = tuned_table.read_table(name, backend, key)
    if table is None:
        return None
    arch = tuned_table.device_arch(backend)
    wins = {(w.op, w.dtype, w.bucket): w for w in table.wins if w.arch == arch}
    rows, winners = [], {}
    for spec in specs:
        for dtype in dtypes or [spec.dtypes[0]]:
            for shape in shapes:
                first = _shapes_for(spec, shape)[spec.signature.args[spec.signature.first_tensor()].name]
                bucket = _core.shape_bucket(list(first))
                win = wins.get((spec.name, dtype, bucket))
                if win is None:
                    return None
                label = "x".join(map(str, shape))
                winners[(spec.name, dtype, label)] = win.config
                rows.append(dict(op=spec.name, dtype=dtype, shape=label, bucket=bucket, config=win.config,
                                 passed=True, median_us=win.seconds * 1e6, speedup=win.default_seconds / win.seconds,
                                 chosen=True, note="cached: measured by an earlier tune of this kernel version"))
    if not (state.status.tuned or "").startswith("in use"):  # written by another process since this one's get
        from registry.resolve import resolve

        line = tuned_table.apply(name, backend, manifest, key, state.ops, lambda config: resolve(
            name, backend, False, lambda _: None, _core.with_config(manifest, config)).ops)
        state.status.tuned = state.in_process.tuned = line
    device_label = torch.cuda.get_device_name() if backend == "cuda" else "cpu"
    return TuneResult(name, device_label, rows, winners, [], 0.0,
                      time.perf_counter() - start, tuned_table.table_path(name, backend, key), 0)


def _tune_case(spec, dtype, torch_dtype, shape, backend, built, labels, reference_fn, module, args, repeats, flush,
               failed) -> list[dict]:
    """Every built config at one (op, dtype, shape): checked, then timed."""
    import torch

    from registry.notebook import checks

    shape_of = _shapes_for(spec, shape)
    generator = torch.Generator(device=backend).manual_seed(0)
    check_args = checks.make_args(spec, 0, torch_dtype, backend, generator, args, shape_of=shape_of)
    # The binding routes a call by its first (non-optional) Tensor argument's shape (core/launcher_table.h).
    bucket = _core.shape_bucket(list(check_args[spec.signature.first_tensor()].shape))
    refs = reference_fn(*checks.reference_args(check_args))
    refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
    names = [r.name for r in spec.signature.returns] or [a.name for a in spec.signature.args if a.mutated]
    rows, default_us = [], None
    for label in labels:
        if label not in built:
            continue
        op = built[label][spec.name]
        row = dict(op=spec.name, dtype=dtype, shape="x".join(map(str, shape)), bucket=bucket, config=label,
                   passed=False, chosen=False, note="", median_us=None, gbps=None, speedup=None)
        rows.append(row)
        if label in failed:
            row["note"] = "skipped: failed at an earlier shape"
            continue
        try:
            trial = [a.clone() if isinstance(a, torch.Tensor) else a for a in check_args]
            outs = checks.results(spec, trial, op(*trial))
            problem = _compare_all(spec, names, outs, refs, module)
        except Exception as error:  # a launcher's error string, a bad launch: dropped, never timed
            problem = f"fault: {_first_line(error)}"
        if problem:
            row["note"] = problem
            failed.add(label)
            continue
        row["passed"] = True
        seconds, moved = _time(op, spec, torch_dtype, backend, shape_of, args, repeats, flush, 1 + labels.index(label))
        row["median_us"], row["gbps"] = seconds * 1e6, moved / seconds / 1e9
    _final_round(rows, built, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels)
    default_us = rows[0]["median_us"] if rows and rows[0]["config"] == labels[0] else None  # None: it failed
    for row in rows:
        if row["median_us"] and default_us:
            row["speedup"] = default_us / row["median_us"]
    return rows


def _final_round(rows, built, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels) -> None:
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
            seconds, _ = _time(op, spec, torch_dtype, backend, shape_of, args, repeats, flush,
                               1000 * (round_ + 1) + labels.index(r["config"]))
            samples[r["config"]].append(seconds * 1e6)
    for r in finalists:
        moved = r["gbps"] * r["median_us"] / 1e6 * 1e9
        r["median_us"] = statistics.median(samples[r["config"]])
        r["gbps"] = moved / (r["median_us"] / 1e6) / 1e9
        r["note"] = f"final round: median of {len(samples[r['config']])} medians"


def _compare_all(spec, names, outs, refs, module) -> str:
    from registry.notebook import checks

    if len(outs) != len(refs):
        return f"the reference returned {len(refs)} values for {len(outs)} outputs"
    for name, out, ref in zip(names, outs, refs):
        rtol, atol = checks.tolerance(checks.dtype_name(out.dtype), module, spec.name)
        result = checks.compare(out, ref, rtol, atol)
        if not result.passed:
            return f"wrong: {name}: {result.reason}"
    return ""


def _time(op, spec, torch_dtype, backend, shape_of, args, repeats, flush, seed: int) -> tuple[float, int]:
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


class _L2Flush:
    """Writes a buffer twice the GPU's L2 size: what the next call reads comes from DRAM."""

    def __init__(self):
        import torch

        size = 2 * torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.buffer = torch.empty(max(size, 1 << 20), dtype=torch.uint8, device="cuda")

    def __call__(self):
        self.buffer.zero_()


def _shapes_for(spec, shape: tuple) -> dict[str, tuple]:
    """Each Tensor argument's shape for the first Tensor's `shape`, through
    the op's sweep sizes (x = "[rows, cols]", w = "[cols]")."""
    if not spec.sweep:
        return {a.name: tuple(shape) for a in spec.signature.args if a.type_name == "Tensor" and not a.optional}
    first = spec.sweep[0][1]
    if len(first) != len(shape):
        raise UsageError(f"{spec.name}: a shape has {len(first)} sizes here ({spec.sweep[0][0]} = "
                         f"[{', '.join(first)}] in kernel.toml), not {len(shape)}: {shape}")
    sizes = {}
    for dim, size in zip(first, shape):
        if not dim.isdigit():
            sizes[dim] = int(size)
    return {name: tuple(int(d) if d.isdigit() else sizes[d] for d in dims) for name, dims in spec.sweep}


def _group(rows: list[dict]) -> dict:
    groups = {}
    for row in rows:
        groups.setdefault((row["op"], row["dtype"], row["shape"]), []).append(row)
    return groups


def _keep(name, backend, key, rows, winners, tuned_table) -> str:
    """The winners into this kernel version's tuned table (merged with what it
    had), written atomically, and to the team cache when one is set."""
    path = tuned_table.table_path(name, backend, key)
    table = _core.read_tuned_table(path) or _core.TunedTable(name, backend, key)
    arch = tuned_table.device_arch(backend)
    by_case = _group(rows)
    for (op_name, dtype, shape), config in winners.items():
        case = {r["config"]: r for r in by_case[(op_name, dtype, shape)]}
        default = next(iter(case.values()))  # the default config's row comes first
        table.put(_core.TunedWin(op=op_name, dtype=dtype, bucket=case[config]["bucket"], arch=arch, config=config,
                                 seconds=case[config]["median_us"] / 1e6,
                                 default_seconds=default["median_us"] / 1e6))
    _core.write_tuned_table(path, table)
    from registry import knobs

    if knobs.remote_cache() is not None:
        from registry.remote import team_cache as remote

        team = remote.current()
        if team is not None and team.available():
            team.put_file(tuned_table.remote_name(path), _core.format_tuned_table(table).encode())
    return path


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"
