"""registry.tune: search a kernel's config space ([tune] in kernel.toml) and
keep the winner per (op, dtype, shape bucket, device arch).

    result = registry.tune("softmax", shapes=[(4096, 256), (65536, 1024)])
    result                        # config x shape: time, GB/s, speed-up over the default
    result.plot()                 # speed-up per config, one line per shape
    registry.status("softmax")    # "tuned table: in use ..."

  build    every config the rule accepts is its own kernel library (its
           defines are in the flags its key covers), built side by side in
           threads, as many at once as memory holds (builder/parallelism.py);
           a cached config costs a lookup. Where the kernel has one unit per
           dtype (gemm_bf16.cu beside gemm_f16.cu, core/dtype_units.h), a
           config is built with the tuned dtypes' units only, one build per
           dtype. A config that fails to build is dropped and reported.
  check    each config runs on the same random inputs per (op, dtype,
           shape), in an isolated worker, against the manifest's float64
           reference (check.py). A config that computes wrong, returns
           an error or crashes is dropped and reported, never timed or chosen;
           the notebook survives a config that segfaults or faults on the GPU.
  time     once every config of the case is checked: fresh inputs per
           config, L2 flushed on CUDA (short calls timed in batches of cold
           calls), the median of `repeats` samples, in two sweeps in opposite
           orders after the GPU warmed up (timing.py), in this process.
  choose   per (op, dtype, shape): the configs within 10 % of the fastest
           (at most 6) and the default are timed again, 5 rounds in turn, each
           round's level divided out; only they can win, on those times: the
           fastest that beats the default by MIN_GAIN in the median and in
           every round (else the default: a winner must be measurably
           better, see beats()).
  keep     the winners go into the tuned table of this kernel version in the
           cache (format: registry/core/tuned_table.h) and the team cache when
           one is set; this process's op dispatches to them at once.

`shapes` are the first Tensor argument's shapes, mapped onto the op's `sweep`
sizes in the manifest (x = "[rows, cols]": (4096, 256) is rows 4096, cols 256);
without a sweep, each Tensor gets the shape.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from registry import _core
from registry.errors import UsageError
from registry.tuning.check import CaseCheck, first_line, stop_workers_started_since, workers_running
from registry.tuning.result import TuneResult
from registry.tuning.timing import L2Flush, final_round, first_pass

MIN_GAIN = 0.01          # a config must beat the default by 1 % to be chosen over it
DEFAULT_REPEATS = 20


def tune(name: str, shapes=None, dtypes: list[str] | None = None, *, device: str | None = None,
         ops: list[str] | None = None, repeats: int = DEFAULT_REPEATS, args: dict | None = None,
         jobs: int | None = None, keep: bool = True, force: bool = False, isolate: bool = True) -> TuneResult:
    """Search `name`'s config space at `shapes` (default: (4096, 1024)) and
    `dtypes` (default: each op's first), keep the winners; see the module doc.
    `args` sets scalar arguments by name; `jobs` bounds the parallel builds
    (default: as many as memory holds); keep=False measures without writing the table;
    isolate=False checks the configs in this process (no worker: a config that
    crashes takes the process with it).
    When this kernel version's table already has a winner for every (op,
    dtype, shape bucket) on this device, nothing is measured (the result says
    "cached"); force=True measures again."""
    # The checks' isolated workers are the tune's own: stopped when it ends, so
    # the notebook is left as it was (on CUDA each holds a context on the GPU
    # and maps the tune's tensors). Workers the user's isolated ops started stay.
    before = workers_running()
    try:
        return _tune(name, shapes, dtypes, device=device, ops=ops, repeats=repeats, args=args, jobs=jobs,
                     keep=keep, force=force, isolate=isolate)
    finally:
        stop_workers_started_since(before)


def _tune(name: str, shapes, dtypes, *, device, ops, repeats, args, jobs, keep, force, isolate) -> TuneResult:
    import torch

    import registry
    from registry import knobs
    from registry.resolve import find, resolve
    from registry import tuned as tuned_table
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
    if ops is not None:
        unknown = sorted(set(ops) - {spec.name for spec in manifest.ops})
        if unknown:
            raise UsageError(f"kernel {name!r} has no op {', '.join(map(repr, unknown))}; its ops: "
                             f"{', '.join(spec.name for spec in manifest.ops)}")
        for spec in specs:
            if not spec.tune_params:
                raise UsageError(f"op {spec.name!r} reads none of the [tune] parameters (tune = [] in its [[op]] "
                                 f"in {manifest.file}): there is nothing to tune for it")
    specs = [spec for spec in specs if spec.tune_params]  # an op with tune = [] has only the default
    if not specs:
        raise UsageError(f"no op of {name!r} reads a [tune] parameter: list the ones each op reads in its "
                         f"[[op]] (tune = [\"THREADS\"]), or leave the key out (all of them)")
    for spec in specs:
        for dtype in dtypes or [spec.dtypes[0]]:
            if dtype not in spec.dtypes:
                raise UsageError(f"{name}.{spec.name}: lists only {', '.join(spec.dtypes)} in kernel.toml, "
                                 f"not {dtype!r}")
        for shape in shapes:
            shape_for(spec, shape, f"{name}.{spec.name}")  # a shape that does not fit, before any build
    if not force:
        cached = _from_table(name, backend, key, manifest, state, specs, dtypes, shapes, tuned_table, start)
        if cached is not None:
            return cached
    configs, labels_of = _configs_per_op(manifest, specs)
    default_label = _core.config_label(configs[0])

    # ---- build, side by side --------------------------------------------
    build_start = time.perf_counter()
    tuned_dtypes = sorted({dtype for spec in specs for dtype in (dtypes or [spec.dtypes[0]])})
    configs_built = build_configs(name, backend, manifest, configs, jobs, tuned_dtypes)
    built, dropped = configs_built.ops, configs_built.dropped
    build_seconds = time.perf_counter() - build_start
    if default_label not in built:
        raise UsageError(f"kernel {name!r}: the default config {default_label} does not build; see above: "
                         + "; ".join(dropped))

    # ---- check, then time, per (op, dtype, shape) --------------------------
    from registry import dtypes as dtype_table
    from registry.notebook import checks

    module = checks.load_reference(manifest) if manifest.reference else None
    flush = L2Flush() if backend == "cuda" else None
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
                check = CaseCheck(spec, torch_dtype, backend, shape_for(spec, shape), args or {}, reference_fn, module,
                                  isolate)
                rows += _tune_case(spec, dtype, torch_dtype, shape, backend, configs_built, labels_of[spec.name],
                                   check, args or {}, repeats, flush, failed)
    for row in rows:
        if not row["passed"]:
            failed.add(row["config"])
    # Choose once every case ran: a config that failed at one shape is out everywhere.
    for (op_name, dtype, shape), case in _group(rows).items():
        timed = {r["config"]: r for r in case if r["passed"] and r["config"] not in failed and r["median_us"]}
        if default_label not in timed:
            continue
        # Only the final round's configs, on its times (timing.final_round):
        # the fastest that beats the default measurably (a fastest with one
        # outlier round does not, and then a steady runner-up is still better
        # than falling back), else the default.
        finalists = [r for r in timed.values() if r.get("round_us")] or list(timed.values())
        default = timed[default_label]
        choice = next((r for r in sorted(finalists, key=lambda r: r["median_us"]) if beats(r, default)), default)
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
                                 lambda config, dtype: configs_built.ops_for(_core.config_label(config), dtype))
        state.status.tuned = state.in_process.tuned = line
    device_label = torch.cuda.get_device_name() if backend == "cuda" else "cpu"
    return TuneResult(name, device_label, rows, winners, dropped, build_seconds, time.perf_counter() - start, path,
                      configs_built.compiled)


def beats(candidate: dict, default: dict) -> bool:
    """Whether `candidate` is measurably faster than the default config: by
    MIN_GAIN in the median, and faster in every final round. The rounds are
    pairs: each times the two side by side and divides out the round's level,
    so a gain that holds in each of them is the config's, not the clock's (5
    of 5 by chance: 1 in 32); a gain carried by one lucky round does not.
    Asking instead that the rounds' ranges lie apart threw away the pairing:
    on the H200 it kept the default at 16384 x 4096 x 1024 against a finalist
    2.5 % faster in the median, 3.7 % head to head (bench/gemm.py)."""
    if candidate is default or candidate["median_us"] >= default["median_us"] * (1 - MIN_GAIN):
        return False
    mine, theirs = candidate.get("round_us"), default.get("round_us")
    return not mine or not theirs or all(a < b for a, b in zip(mine, theirs))


def _configs_per_op(manifest, specs) -> tuple[list, dict[str, list[str]]]:
    """The configs to build (the default first) and, per op, the labels of
    those it is tried with: the ones that differ from the default only in
    the parameters the op reads (its `tune` key), so a kernel's ops cost the
    sum of their spaces, not the product."""
    every = manifest.tune.enumerate()  # the default first
    defaults = dict(every[0])
    labels_of, wanted = {}, set()
    for spec in specs:
        reads = set(spec.tune_params)
        mine = [i for i, config in enumerate(every)
                if all(value == defaults[param] for param, value in config if param not in reads)]
        labels_of[spec.name] = [_core.config_label(every[i]) for i in mine]
        wanted.update(mine)
    return [every[i] for i in sorted(wanted)], labels_of


@dataclass
class BuiltConfigs:
    """Each config that built: its ops and its build's files (Status.artifacts),
    by label (every dtype's units); by (label, dtype) where a config was built
    with one dtype's units only (config_builds); why each other config was
    dropped; how many compiled."""

    ops: dict = field(default_factory=dict)
    artifacts: dict = field(default_factory=dict)
    dropped: list = field(default_factory=list)
    compiled: int = 0
    by_dtype: dict = field(default_factory=dict)  # (label, dtype) -> (ops, artifacts)

    def ops_for(self, label: str, dtype: str):
        """The ops that run `label` for `dtype`, or None where that build failed."""
        if (label, dtype) in self.by_dtype:
            return self.by_dtype[(label, dtype)][0]
        return self.ops.get(label)

    def artifacts_for(self, label: str, dtype: str):
        if (label, dtype) in self.by_dtype:
            return self.by_dtype[(label, dtype)][1]
        return self.artifacts.get(label)


def config_builds(manifest, backend: str, configs, dtypes: list[str] | None) -> list[tuple[str, str | None, object]]:
    """(label, dtype or None, manifest) per build a tune needs: each config
    with only the tuned dtypes' own units (core/dtype_units.h: gemm_bf16.cu
    for gemm's bfloat16), one build per dtype, so a win's config is the very
    build a later get loads for that dtype (tuned.apply); the default config
    whole (it is the plain get's library). A kernel whose units all serve
    every dtype builds each config once, whole (dtype None)."""
    builds = []
    for i, config in enumerate(configs):
        label, whole = _core.config_label(config), _core.with_config(manifest, config)
        parts = [(d, _core.with_dtypes(whole, backend, [d])) for d in (dtypes or [])] if i else []
        if not parts or all(not part.dtype_subset for _, part in parts):
            builds.append((label, None, whole))
        else:
            builds += [(label, d, part) for d, part in parts]
    return builds


def build_configs(name: str, backend: str, manifest, configs, jobs: int | None = None,
                  dtypes: list[str] | None = None) -> BuiltConfigs:
    """Each config built (or found cached) side by side (config_builds: only
    the units of `dtypes` where the kernel has one per dtype): at most `jobs`
    at once, by default as many as memory holds (builder/parallelism.py says
    why not one per core)."""
    from concurrent.futures import ThreadPoolExecutor

    from registry import environment
    from registry.builder.parallelism import parallel_builds
    from registry.resolve import resolve

    def build(manifest_of_build):
        return resolve(name, backend, False, lambda *_: None, manifest_of_build)

    built = BuiltConfigs()
    builds = config_builds(manifest, backend, configs, dtypes)
    # The compilers one build runs (the default config, first, is the plain get's: built already).
    units = max((len(environment.section(m, backend).sources) for _, _, m in builds[1:]), default=1)
    workers = max(1, min(len(builds), jobs or parallel_builds(len(builds), units)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [(label, dtype, pool.submit(build, m)) for label, dtype, m in builds]
        for label, dtype, future in futures:
            try:
                state = future.result()
            except Exception as error:  # a config that does not build is reported, the rest go on
                built.dropped.append(f"{label}{f' ({dtype})' if dtype else ''}: build failed: {first_line(error)}")
                continue
            if dtype is None:
                built.ops[label], built.artifacts[label] = state.ops, state.status.artifacts
            else:
                built.by_dtype[(label, dtype)] = state.ops, state.status.artifacts
            built.compiled += bool(state.status.compiled)
    return built


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
                first = shape_for(spec, shape)[spec.signature.args[spec.signature.first_tensor()].name]
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

        line = tuned_table.apply(name, backend, manifest, key, state.ops, lambda config, dtype: resolve(
            name, backend, False, lambda *_: None, tuned_table.config_manifest(manifest, backend, config, dtype)).ops)
        state.status.tuned = state.in_process.tuned = line
    device_label = torch.cuda.get_device_name() if backend == "cuda" else "cpu"
    return TuneResult(name, device_label, rows, winners, [], 0.0,
                      time.perf_counter() - start, tuned_table.table_path(name, backend, key), 0)


def _tune_case(spec, dtype, torch_dtype, shape, backend, built: BuiltConfigs, labels, check: CaseCheck, args,
               repeats, flush, failed) -> list[dict]:
    """Every built config at one (op, dtype, shape): all checked, then all
    timed together (timing.py: first_pass, final_round)."""
    shape_of = shape_for(spec, shape)
    rows, ops = [], {}
    for label in labels:
        ops_of = built.ops_for(label, dtype)
        if ops_of is None:
            continue
        op = ops_of[spec.name]
        row = dict(op=spec.name, dtype=dtype, shape="x".join(map(str, shape)), bucket=check.bucket, config=label,
                   passed=False, chosen=False, note="", median_us=None, gbps=None, speedup=None)
        rows.append(row)
        if label in failed:
            row["note"] = "skipped: failed at an earlier shape"
            continue
        problem = check.problem(op, built.artifacts_for(label, dtype))
        if problem:
            row["note"] = problem
            failed.add(label)
            continue
        row["passed"] = True
        ops[label] = op
    first_pass(rows, ops, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels)
    final_round(rows, ops, spec, torch_dtype, backend, shape_of, args, repeats, flush, labels)
    default_us = rows[0]["median_us"] if rows and rows[0]["config"] == labels[0] else None  # None: it failed
    for row in rows:
        if row["median_us"] and default_us:
            row["speedup"] = default_us / row["median_us"]
    return rows


def shape_for(spec, shape: tuple, label: str = "") -> dict[str, tuple]:
    """Each Tensor argument's shape for `shape`, through the op's sweep sizes
    (x = "[rows, cols]", w = "[cols]"): either the first Tensor's shape, or
    every named size in the order the sweep first names them, where the first
    Tensor's do not name them all (a = "[m, k]", b = "[k, n]": (m, k, n)). label: the op as
    errors name it ("<kernel>.<op>")."""
    if not spec.sweep:
        return {a.name: tuple(shape) for a in spec.signature.args if a.type_name == "Tensor" and not a.optional}
    first = spec.sweep[0][1]
    names = []
    for _, dims in spec.sweep:
        names += [d for d in dims if not d.isdigit() and d not in names]
    if len(shape) == len(first):
        sizes = {dim: int(size) for dim, size in zip(first, shape) if not dim.isdigit()}
    elif len(shape) == len(names):
        sizes = dict(zip(names, map(int, shape)))
    else:
        raise UsageError(f"{label or spec.name}: a shape has {len(first)} sizes here ({spec.sweep[0][0]} = "
                         f"[{', '.join(first)}] in kernel.toml), or {len(names)} ({', '.join(names)}), "
                         f"not {len(shape)}: {shape}")
    missing = [d for d in names if d not in sizes]
    if missing:
        raise UsageError(f"{label or spec.name}: a shape of {len(shape)} sizes leaves {', '.join(missing)} unset; "
                         f"give all {len(names)} ({', '.join(names)})")
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
