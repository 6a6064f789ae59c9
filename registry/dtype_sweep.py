"""Check and time a kernel over dtypes and sizes, against its float64 reference.

    result = registry.sweep("axpy")          # a table in a notebook
    result.passed                            # every row that ran is correct
    result.plot("gbps")                      # GB/s vs n, one line per dtype

For each op of the kernel, dtype (default: the manifest's) and size n
(default: a few from 1 to what fits the memory budget):

  inputs     every Tensor argument gets shape (n,) and the dtype, filled with
             torch.randn (never zeros: an op that writes nothing must not pass
             by luck); scalars get a fixed value (1.5, 3, True) unless `args`
             names them.
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
             (rtol, atol) per dtype (TOLERANCES); NaN/inf where the reference
             is finite fails; an all-zero output for a nonzero reference fails.
  time       median of `repeats` calls after warm-up: CUDA events on CUDA,
             perf_counter on the CPU. Inputs rotate between two sets when a set
             is small enough to stay in cache, so a timing is not just a cache hit.
  GB/s       (bytes of every Tensor input + the output) / median time. On CUDA
             also as a fraction of a device-to-device copy (read + write bytes),
             measured once per sweep.

Sizes that do not fit the memory budget are listed as skipped, with why.
"""
from __future__ import annotations

from pathlib import Path

import torch

from registry.checks import DEFAULT_SCALARS, TOLERANCES, compare, load_reference, make_args  # noqa: F401
from registry.timing import median_seconds

CPU_SIZES = [1, 17, 2**16, 2**20]
CUDA_SIZES = [1, 17, 2**16, 2**24, 2**28]
BUDGET_FRACTION = 0.5    # of free device memory (CUDA) or available RAM (CPU)
CACHE_RESIDENT_BYTES = 64 << 20  # an input set below this may stay in L2/L3: rotate two
COLUMNS = ["op", "dtype", "n", "max_abs_err", "max_rel_err", "rtol", "atol", "passed",
           "median_ms", "gbps", "fraction_of_copy", "note"]


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
            raise ValueError(f"metric must be 'gbps' or 'ms', not {metric!r}")
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


def sweep(name: str, dtypes: list[str] | None = None, sizes: list[int] | None = None, *,
          device: str | None = None, memory_budget: int | None = None, repeats: int = 20,
          args: dict | None = None, ops: list[str] | None = None) -> SweepResult:
    """Check `name`'s ops against the reference and time them; see the module doc.
    `args` sets scalar arguments by name (e.g. {"alpha": 2.0}); `ops` picks
    ops of a multi-op kernel (default: all)."""
    import pandas as pd

    import registry
    from registry import _core, knobs
    from registry.kernel import locate

    manifest = _core.parse_manifest(locate(name))
    device = device or knobs.device() or ("cuda" if torch.cuda.is_available() and manifest.cuda.present else "cpu")
    handle = registry.get(name, device=device)
    reference = load_reference(manifest)
    budget = memory_budget if memory_budget is not None else _default_budget(device)
    sizes = list(sizes) if sizes is not None else (CUDA_SIZES if device == "cuda" else CPU_SIZES)
    copy_gbps = _copy_bandwidth(budget) if device == "cuda" else None

    rows = []
    for spec in manifest.ops:
        if ops is not None and spec.name not in ops:
            continue
        op = handle if len(manifest.ops) == 1 else handle.ops[spec.name]
        fn = getattr(reference, spec.reference, None)
        if fn is None:
            raise AttributeError(f"{manifest.reference} has no function {spec.reference!r} for op {spec.name!r}; "
                                 f"define it, or set reference = \"...\" in the [[op]] of {manifest.file}")
        for dtype in dtypes or list(spec.dtypes):
            if dtype not in TOLERANCES:
                raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(TOLERANCES)}")
            for n in sizes:
                if dtype not in spec.dtypes:  # the op would refuse it: say so in the table
                    rows.append(dict(op=spec.name, dtype=dtype, n=n, passed=None,
                                     note=f"skipped: {spec.name} lists only {', '.join(spec.dtypes)} in kernel.toml"))
                    continue
                rows.append(_run_case(op, fn, spec, dtype, n, device, budget, repeats, args or {}, copy_gbps))
    table = pd.DataFrame(rows, columns=COLUMNS)
    if device != "cuda":
        table = table.drop(columns=["fraction_of_copy"])
    return SweepResult(table, name, _device_label(device), copy_gbps)


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


def _needed_bytes(n: int, tensors: int, element: int, sets: int) -> int:
    # Input sets + output + poison block in the dtype, plus the float64
    # reference and the float64 copies the comparison makes (about 4 x 8 n).
    return n * element * (tensors * sets + 2) + n * 8 * (tensors + 4)


def _run_case(op, reference, spec, dtype: str, n: int, device: str, budget: int, repeats: int,
              args: dict, copy_gbps: float | None) -> dict:
    rtol, atol = TOLERANCES[dtype]
    torch_dtype = getattr(torch, dtype)
    element = torch.empty((), dtype=torch_dtype).element_size()
    tensors = [a for a in spec.signature.args if a.type_name == "Tensor"]
    set_bytes = n * element * len(tensors)
    sets = 2 if set_bytes <= CACHE_RESIDENT_BYTES else 1
    row = dict(op=spec.name, dtype=dtype, n=n, rtol=rtol, atol=atol, passed=None, note="")
    needed = _needed_bytes(n, len(tensors), element, sets)
    if needed > budget:
        row["note"] = f"skipped: needs ~{needed / 2**30:.2f} GiB, budget {budget / 2**30:.2f} GiB (pass memory_budget= to change)"
        return row

    generator = torch.Generator(device=device).manual_seed(n)
    input_sets = [make_args(spec, n, torch_dtype, device, generator, args) for _ in range(sets)]
    _poison(n, torch_dtype, device)
    out = op(*input_sets[0])
    ref = reference(*[a.detach().to("cpu", torch.float64) if isinstance(a, torch.Tensor) else a for a in input_sets[0]])
    check = compare(out, ref, rtol, atol)
    del out, ref
    seconds = median_seconds(op, input_sets, device, repeats)
    moved = set_bytes + n * element  # inputs read + output written
    gbps = moved / seconds / 1e9
    row.update(max_abs_err=check.max_abs_err, max_rel_err=check.max_rel_err, passed=check.passed,
               median_ms=seconds * 1e3, gbps=gbps,
               fraction_of_copy=gbps / copy_gbps if copy_gbps else None, note=check.reason)
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
