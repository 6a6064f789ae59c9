"""Check and time a kernel over dtypes and sizes, against its float64 reference.

    result = registry.sweep("axpy")          # a table in a notebook
    result.passed                            # every row that ran is correct
    result.plot("gbps")                      # GB/s vs n, one line per dtype

    registry.sweep(op, reference=fn)         # an inline %%kernel op, with its reference

For each op of the kernel, dtype (default: the manifest's) and size n
(default: a few from 1 to what fits the memory budget):

  inputs     every Tensor argument gets its shape from the op's `sweep` in the
             manifest, n mapped onto its named sizes (checks.sweep_sizes: 17
             is the ragged 17 x 33), else (n,); filled with torch.randn in the
             dtype, or the manifest's fixed dtype (never zeros: an op that
             writes nothing must not pass by luck); scalars get the signature's
             default or a fixed value (1.5, 3, True) unless `args` names them.
  poison     the op allocates its output (empty_like). Right before the checked
             call a NaN-filled tensor of the output's size is allocated and
             freed, so the caching allocator (CUDA) likely hands that block to
             the output: elements the kernel forgets to write stay NaN. On the
             CPU large blocks come fresh from the OS as zeros, so poisoning is
             best-effort; what catches unwritten output everywhere is the
             comparison below (NaN, or all zeros, never pass).
  reference  the manifest's reference module (loaded from the kernel folder),
             called on the same inputs converted to float64 on the CPU.
  check      pass iff |out - ref| <= atol + rtol * |ref| for every element, with
             (rtol, atol) per output's dtype (TOLERANCES); NaN/inf where the
             reference is finite fails; an all-zero output for a nonzero
             reference fails. A row shows the output that decided it
             (`decided_by`: the first that failed, else the one nearest its
             tolerance) with that output's errors and tolerance.
  time       median of `repeats` calls after warm-up: CUDA events on CUDA,
             perf_counter on the CPU. Inputs rotate between two sets when a set
             is small enough to stay in cache, so a timing is not just a cache hit.
  GB/s       (bytes of every Tensor input + every output) / median time. On
             CUDA also as a fraction of a device-to-device copy (read + write
             bytes), measured once per sweep.
  baseline   when the op names one (`baseline` in the manifest: a function of
             the reference module doing the same with torch's own ops), its
             median time on the same inputs and the speed-up over it.
  failures   an exception in a row (a launcher error, a bad shape) marks that
             row failed with the message; the sweep goes on.

Sizes that do not fit the memory budget are listed as skipped, with why.
"""
from __future__ import annotations

from pathlib import Path

import torch

from registry import dtypes as dtype_table
from registry.errors import UsageError
from registry.notebook.checks import DEFAULT_SCALARS, TOLERANCES, compare, load_reference, make_args  # noqa: F401
from registry.notebook.timing import median_seconds

CPU_SIZES = [1, 17, 2**16, 2**20]
CUDA_SIZES = [1, 17, 2**16, 2**24, 2**28]
BUDGET_FRACTION = 0.5    # of free device memory (CUDA) or available RAM (CPU)
CACHE_RESIDENT_BYTES = 64 << 20  # an input set below this may stay in L2/L3: rotate two
COLUMNS = ["op", "dtype", "n", "shape", "max_abs_err", "max_rel_err", "rtol", "atol", "decided_by", "passed",
           "median_ms", "gbps", "fraction_of_copy", "baseline_ms", "speedup", "note"]


class SweepResult:
    """The table (`.table`, a pandas DataFrame) and how it was measured."""

    def __init__(self, table, kernel: str, device: str, copy_gbps: float | None):
        self.table, self.kernel, self.device, self.copy_gbps = table, kernel, device, copy_gbps
        self.torch_version = torch.__version__

    @property
    def passed(self) -> bool:
        ran = self.table[self.table["passed"].notna()]
        return bool(len(ran)) and bool(ran["passed"].astype(bool).all())

    def caption(self) -> str:
        copy = f"device copy {self.copy_gbps:.0f} GB/s" if self.copy_gbps else "no copy baseline (CPU)"
        return f"kernel {self.kernel} on {self.device}, torch {self.torch_version}, {copy}"

    def _repr_html_(self) -> str:
        import html

        return f"<p><b>sweep</b>: {html.escape(self.caption())}</p>" + self.table.to_html(index=False, na_rep="")

    def __repr__(self) -> str:
        return f"sweep: {self.caption()}\n{self.table.to_string(index=False)}"

    def plot(self, metric: str = "gbps"):
        """`metric` ("gbps" or "ms") vs n, log x, one line per op and dtype; returns the Figure."""
        import matplotlib.pyplot as plt

        column = {"gbps": "gbps", "ms": "median_ms"}.get(metric)
        if column is None:
            raise UsageError(f"metric must be 'gbps' or 'ms', not {metric!r}")
        fig, ax = plt.subplots(figsize=(6.5, 4))
        ran = self.table[self.table["median_ms"].notna()]
        several_ops = ran["op"].nunique() > 1
        for (op, dtype), rows in ran.groupby(["op", "dtype"], sort=False):
            rows = rows.sort_values("n")
            ax.plot(rows["n"], rows[column], marker="o", label=f"{op} {dtype}" if several_ops else dtype)
        if metric == "gbps" and self.copy_gbps:
            ax.axhline(self.copy_gbps, linestyle="--", color="gray", label="device copy")
        ax.set_xscale("log", base=2)
        if metric == "ms":
            ax.set_yscale("log")
        ax.set_xlabel("n (elements)")
        ax.set_ylabel("GB/s achieved" if metric == "gbps" else "median time (ms)")
        ax.set_title(self.caption(), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        plt.close(fig)  # returned, not left to pyplot: a notebook shows it once
        return fig


def sweep(name, dtypes: list[str] | None = None, sizes: list[int] | None = None, *,
          device: str | None = None, memory_budget: int | None = None, repeats: int = 20,
          args: dict | None = None, ops: list[str] | None = None, reference=None) -> SweepResult:
    """Check `name`'s ops against the reference and time them; see the module doc.
    `name` is a kernel name or an op handle (e.g. from %%kernel); `reference`
    replaces the reference module's function (needed for a handle whose kernel
    has none). `args` sets scalar arguments by name (e.g. {"alpha": 2.0});
    `ops` picks ops of a multi-op kernel (default: all)."""
    import pandas as pd

    import registry
    from registry.op import Op
    from registry.resolve import find

    handle = name if isinstance(name, Op) else None
    kernel = handle.kernel if handle is not None else name
    manifest = find(kernel)
    if handle is None:
        # With no device given, get's own rule (REGISTRY_DEVICE, else CUDA when
        # available and the kernel has it) picks it; the sweep runs where the op does.
        handle = registry.get(kernel, device=device)
    any_op = handle if isinstance(handle, Op) else next(iter(handle.ops.values()))
    device = device or any_op.backend
    module = load_reference(manifest) if manifest.reference else None
    budget = memory_budget if memory_budget is not None else _default_budget(device)
    sizes = list(sizes) if sizes is not None else (CUDA_SIZES if device == "cuda" else CPU_SIZES)
    copy_gbps = _copy_bandwidth(budget) if device == "cuda" else None

    rows = []
    for spec in manifest.ops:
        if ops is not None and spec.name not in ops:
            continue
        if isinstance(name, Op) and spec.name != name.name:
            continue
        op = handle if not hasattr(handle, "ops") else handle.ops[spec.name]
        fn = reference if reference is not None else getattr(module, spec.reference, None)
        if fn is None:
            where = (f"define {spec.reference}() in {Path(manifest.dir) / manifest.reference}" if module is not None
                     else f"add reference = \"reference.py\" to {manifest.file} with a float64 {spec.reference}()")
            raise UsageError(f"{kernel}.{spec.name}: no reference to check against: pass "
                             f"registry.sweep(..., reference=<a float64 function taking the op's arguments>), "
                             f"or {where}")
        baseline = getattr(module, spec.baseline, None) if spec.baseline and module is not None else None
        for dtype in dtypes or list(spec.dtypes):
            if dtype not in dtype_table.NAMES:
                raise UsageError(f"unknown dtype {dtype!r}; choose from {', '.join(dtype_table.NAMES)}")
            for n in sizes:
                if dtype not in spec.dtypes:  # the op would refuse it: say so in the table
                    rows.append(dict(op=spec.name, dtype=dtype, n=n, passed=None,
                                     note=f"skipped: {spec.name} lists only {', '.join(spec.dtypes)} in kernel.toml"))
                    continue
                try:
                    rows.append(_run_case(op, fn, baseline, module, spec, dtype, n, device, budget, repeats,
                                          args or {}, copy_gbps))
                except Exception as error:  # one bad row is reported, the sweep goes on
                    rows.append(dict(op=spec.name, dtype=dtype, n=n, passed=False,
                                     note=f"error: {type(error).__name__}: {str(error).splitlines()[0][:300]}"))
    table = pd.DataFrame(rows, columns=COLUMNS)
    if device != "cuda":
        table = table.drop(columns=["fraction_of_copy"])
    return SweepResult(table, kernel, _device_label(device), copy_gbps)


def _default_budget(device: str) -> int:
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return int(free * BUDGET_FRACTION)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(int(line.split()[1]) * 1024 * BUDGET_FRACTION)
    except OSError:
        pass
    return 4 << 30  # no /proc: a conservative guess


def _device_label(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def _run_case(op, reference, baseline, module, spec, dtype: str, n: int, device: str, budget: int, repeats: int,
              args: dict, copy_gbps: float | None) -> dict:
    from registry.notebook.checks import check_call, results, shapes, split_arguments

    torch_dtype = dtype_table.torch_dtype(dtype)
    element = torch.empty((), dtype=torch_dtype).element_size()
    shape_of = shapes(spec, n)
    elements = sum(int(torch.Size(s).numel()) for s in shape_of.values())
    label = " ".join(f"{k}{list(v)}" for k, v in shape_of.items())
    row = dict(op=spec.name, dtype=dtype, n=n, shape=label, passed=None, note="")
    set_bytes = elements * element
    sets = 2 if set_bytes <= CACHE_RESIDENT_BYTES else 1
    # Input sets + outputs + poison block, plus the float64 reference and the
    # float64 copies the comparison makes.
    needed = set_bytes * (sets + 2) + elements * 8 * 5
    if needed > budget:
        row["note"] = f"skipped: needs ~{needed / 2**30:.2f} GiB, budget {budget / 2**30:.2f} GiB (pass memory_budget= to change)"
        return row

    generator = torch.Generator(device=device).manual_seed(n)
    input_sets = [make_args(spec, n, torch_dtype, device, generator, args) for _ in range(sets)]
    _poison(max(1, elements), torch_dtype, device)
    check = check_call(op, spec, reference, list(input_sets[0]), module)
    # Keyword-only arguments go by keyword, to the op and to its baseline.
    calls = [split_arguments(spec, args) for args in input_sets]
    positional_sets, keyword_sets = [c[0] for c in calls], [c[1] for c in calls]
    outs = results(spec, input_sets[0], op(*positional_sets[0], **keyword_sets[0]))
    out_bytes = sum(o.numel() * o.element_size() for o in outs)
    in_bytes = sum(a.numel() * a.element_size() for a in input_sets[0] if isinstance(a, torch.Tensor))
    del outs
    seconds = median_seconds(op, positional_sets, device, repeats, keyword_sets=keyword_sets)
    gbps = (in_bytes + out_bytes) / seconds / 1e9
    row.update(max_abs_err=check.max_abs_err, max_rel_err=check.max_rel_err, rtol=check.rtol, atol=check.atol,
               decided_by=check.output, passed=check.passed,
               median_ms=seconds * 1e3, gbps=gbps,
               fraction_of_copy=gbps / copy_gbps if copy_gbps else None, note=check.reason)
    if baseline is not None:
        base_seconds = median_seconds(baseline, positional_sets, device, repeats, keyword_sets=keyword_sets)
        row.update(baseline_ms=base_seconds * 1e3, speedup=base_seconds / seconds)
    return row


def _poison(n: int, dtype, device: str) -> None:
    block = torch.full((n,), float("nan"), dtype=dtype, device=device)
    del block  # freed back to the caching allocator, ready for the op's output


def _copy_bandwidth(budget: int, target_bytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting read + write bytes."""
    size = max(1 << 20, min(target_bytes, budget // 4))
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    seconds = median_seconds(lambda a, b: b.copy_(a), [[src, dst]], "cuda", repeats=10)
    return 2 * size / seconds / 1e9
