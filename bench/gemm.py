"""kernels/gemm on the GPU beside torch.matmul (cuBLAS), in one run.

    python3 bench/gemm.py --out DIR [--tune] [--compile] [--edits 3]

  speed    per shape (bf16; M x N x K = 8192^3, 4096^3, 16384 x 1024 x 4096):
           the registry op and torch.matmul interleaved, 7 rounds of 20 timed
           calls each after warm-up, on random inputs (never zeros); the
           median of each side's round medians, TFLOP/s and op / cuBLAS. With
           --tune, registry.tune(...) first (from the cache it is given: its
           seconds, builds apart, and again cached), then every config timed
           again at every shape (5 interleaved rounds): per shape the chosen
           config's time over the best's (target: within 3 %); and the tuned
           op is what is timed. The op's result is checked against
           torch.matmul's at each shape first (f32 comparison, bf16 tolerance).
  compile  with --compile, torch.compile(torch.matmul, mode="max-autotune")
           timed the same way (its own autotuning picks cuBLAS or a Triton
           template): the figure beside ours.
  edits    with --edits N, the edit loop on a copy of the kernel: N edits of
           the epilogue (a real change of the device code), each followed by
           registry.get and a checked call (seconds from the save to the
           checked result); then a revert (answered from the cache); and the
           floor beside it: `nvcc --time` on the edited unit alone, its phases
           in seconds (cudafe++ splits host from device code; cicc is the
           device front end and NVVM together; ptxas; gcc compiles the host
           side).

Writes DIR/gemm.md and DIR/gemm.json; prints the table last.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
# (m, k, n) in the sweep's order (kernel.toml: a = "[m, k]", b = "[k, n]").
SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 4096, 1024)]
CONFIRM_ROUNDS = 9  # the chosen config and the re-measure's best, timed again head to head


def label(shape) -> str:
    m, k, n = shape
    return f"{m}x{n}x{k}"


def interleaved(contenders: dict, rounds: int = 7, calls: int = 20) -> dict:
    """{name: median of round medians, ms}: each contender timed per call with
    CUDA events, the order rotated every round."""
    import torch

    names = list(contenders)
    for fn in contenders.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    per_round = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times = []
            for _ in range(calls):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                contenders[name]()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            per_round[name].append(statistics.median(times))
    return {n: statistics.median(v) for n, v in per_round.items()}


def speed(op, compile_too: bool) -> list[dict]:
    import torch

    rows = []
    compiled = torch.compile(torch.matmul, mode="max-autotune") if compile_too else None
    for shape in SHAPES:
        m, k, n = shape
        gen = torch.Generator(device="cuda").manual_seed(m + k + n)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        want = torch.matmul(a, b).float()
        got = op(a, b).float()
        err = ((got - want).norm() / want.norm()).item()
        contenders = {"registry": lambda: op(a, b), "cublas": lambda: torch.matmul(a, b)}
        if compiled is not None:
            t0 = time.perf_counter()
            compiled(a, b)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            contenders["max-autotune"] = lambda: compiled(a, b)
        ms = interleaved(contenders)
        flop = 2 * m * n * k
        row = dict(shape=label(shape), rel_err=err, **{f"{k_}_ms": v for k_, v in ms.items()},
                   **{f"{k_}_tflops": flop / v / 1e9 for k_, v in ms.items()},
                   ratio=ms["cublas"] / ms["registry"])
        if compiled is not None:
            row["compile_s"] = compile_s
            row["max_autotune_ratio"] = ms["cublas"] / ms["max-autotune"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


EPILOGUE_LINE = "using Fusion = cutlass::epilogue::fusion::LinCombPerColBias<Element, float, Element, Element, float>;"


def edits(count: int) -> dict:
    """The edit loop on a copy of kernels/gemm (module docstring)."""
    import torch

    import registry

    root = Path(tempfile.mkdtemp(prefix="gemm-edits-"))
    shutil.copytree(CHECKOUT / "kernels" / "gemm", root / "gemm_edit")
    os.environ["REGISTRY_KERNELS_PATH"] = str(root)
    header = root / "gemm_edit" / "include" / "gemm" / "hopper.cuh"
    original = header.read_text()
    assert EPILOGUE_LINE in original
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(768, device="cuda", dtype=torch.bfloat16)

    def checked(op, scale: float) -> float:
        got = op(a, b, None, bias, scale, 0.0).float()
        want = scale * (a.float() @ b.float()) + bias.float()
        err = ((got - want).norm() / want.norm()).item()
        assert err < 1e-2, f"the edited gemm is wrong: relative error {err}"
        return err

    t0 = time.perf_counter()
    op = registry.get("gemm_edit", device="cuda")
    checked(op, 1.0)
    cold_s = time.perf_counter() - t0
    steps = []
    for i in range(count):
        # A real change of the epilogue's code: the output's rounding style.
        style = ["round_toward_zero", "round_half_ulp_truncate", "round_to_nearest"][i % 3]
        header.write_text(original.replace(
            EPILOGUE_LINE, EPILOGUE_LINE.replace("float>;", f"float, 128 / cute::sizeof_bits_v<Element>, "
                                                             f"cutlass::FloatRoundStyle::{style}>;")))
        t0 = time.perf_counter()
        op = registry.get("gemm_edit", device="cuda")
        err = checked(op, 0.5 + i)
        seconds = time.perf_counter() - t0
        status = registry.status("gemm_edit")
        steps.append(dict(edit=style, seconds=seconds, rel_err=err, status=str(status).splitlines()[:3]))
        print(json.dumps(steps[-1], default=str), flush=True)
    header.write_text(original)
    t0 = time.perf_counter()
    op = registry.get("gemm_edit", device="cuda")
    checked(op, 1.0)
    revert_s = time.perf_counter() - t0
    return dict(cold_s=cold_s, edits=steps, median_edit_s=statistics.median(s["seconds"] for s in steps),
                revert_s=revert_s, floor=floor(root / "gemm_edit"))


def floor(kernel_dir: Path) -> dict:
    """`nvcc --time` on the bf16 unit alone, as the registry compiles it
    (without torch's flags): seconds per phase."""
    import cutlass_library

    cut = Path(cutlass_library.__file__).parent / "source"
    work = Path(tempfile.mkdtemp(prefix="gemm-floor-"))
    table = work / "time.csv"
    command = ["nvcc", "--time", str(table), "-O3", "-std=c++17", "-DNDEBUG", "--expt-relaxed-constexpr",
               "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-fPIC", "-c",
               f"-I{CHECKOUT}/registry/include", f"-I{kernel_dir}/include", f"-I{cut}/include",
               f"-I{cut}/tools/util/include", str(kernel_dir / "gemm_bf16.cu"), "-o", str(work / "gemm_bf16.o")]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, cwd=work, capture_output=True)
    total = time.perf_counter() - t0
    phases: dict[str, float] = {}
    with open(table) as f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[-1].strip().replace(".", "", 1).isdigit():
                phases[row[1].strip()] = phases.get(row[1].strip(), 0.0) + float(row[-1]) / 1e3
    device = sum(v for k, v in phases.items() if k.startswith(("cicc", "ptxas")))
    return dict(total_s=total, phases_s=phases, nvvm_plus_ptxas_s=device)


def remeasure(result) -> str:
    """Every config timed again at every shape as tune times them (bench/tune_rows.py's
    exhaustive re-measure, 5 interleaved rounds), in this run: the chosen config against
    the best (target: within 3 %). The best of 24 noisy medians is the luckiest
    draw among the configs that tie (at 4096^3 nine read within 3 %), so where it
    is not the chosen one the two are timed again head to head, CONFIRM_ROUNDS
    interleaved rounds on new inputs: both figures are reported."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tune_rows import exhaustive

    times = exhaustive("gemm", SHAPES, "bfloat16", "cuda")
    picks = {}
    for shape in SHAPES:
        medians = {config: statistics.median(v) for config, v in times["x".join(map(str, shape))].items()}
        picks[shape] = (result.winners.get(("gemm", "bfloat16", "x".join(map(str, shape)))),
                        min(medians, key=medians.get), medians)
    contests = {"x".join(map(str, shape)): [chosen, best] for shape, (chosen, best, _) in picks.items()
                if chosen is not None and chosen != best}
    again = exhaustive("gemm", SHAPES, "bfloat16", "cuda", rounds=CONFIRM_ROUNDS, only=contests, seed=9000)
    lines = ["| shape (m, k, n) | chosen | chosen us | best | best us | chosen / best | within 3 % | default us "
             f"| head to head, {CONFIRM_ROUNDS} rounds: chosen / best |",
             "|---|---|---|---|---|---|---|---|---|"]
    for shape, (chosen, best, medians) in picks.items():
        default = next(iter(medians))
        gap = medians.get(chosen, float("nan")) / medians[best]
        pair = again.get("x".join(map(str, shape)), {})
        head = (f"{statistics.median(pair[chosen]) / statistics.median(pair[best]):.3f}"
                if chosen in pair and best in pair else "-")
        lines.append(f"| {shape} | {chosen} | {medians.get(chosen, float('nan')):.1f} | {best} | {medians[best]:.1f} "
                     f"| {gap:.3f} | {'yes' if gap <= 1.03 else 'NO'} | {medians[default]:.1f} | {head} |")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def report(rows, edit, tune_info, machine, command) -> str:
    lines = ["# kernels/gemm beside cuBLAS", "", f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine}",
             "", f"    {command}", ""]
    if tune_info:
        lines += [f"registry.tune: {tune_info}", ""]
    if rows:
        has_compile = "max-autotune_ms" in rows[0]
        lines += ["| shape (M x N x K) | registry TFLOP/s | cuBLAS TFLOP/s | registry / cuBLAS | rel. error |"
                  + (" max-autotune TFLOP/s | max-autotune / cuBLAS |" if has_compile else ""),
                  "|---|---|---|---|---|" + ("---|---|" if has_compile else "")]
        for r in rows:
            lines.append(f"| {r['shape']} | {r['registry_tflops']:.0f} | {r['cublas_tflops']:.0f} | {r['ratio']:.3f} "
                         f"| {r['rel_err']:.2e} |" + (f" {r['max-autotune_tflops']:.0f} | "
                                                     f"{r['max_autotune_ratio']:.3f} |" if has_compile else ""))
    if edit:
        f = edit["floor"]
        lines += ["", f"Edit loop: cold get {edit['cold_s']:.1f} s; edits (save -> checked result): "
                  + ", ".join(f"{s['seconds']:.1f}" for s in edit["edits"])
                  + f" s (median {edit['median_edit_s']:.1f}); revert {edit['revert_s']:.3f} s.",
                  f"Floor, nvcc on the edited unit alone: {f['total_s']:.1f} s, of which the device compile, "
                  f"cicc (EDG front end + NVVM) + ptxas, {f['nvvm_plus_ptxas_s']:.1f} s; median edit / that: "
                  f"{edit['median_edit_s'] / max(f['nvvm_plus_ptxas_s'], 1e-9):.2f}.",
                  "Phases (s): " + ", ".join(f"{k} {v:.2f}" for k, v in f["phases_s"].items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--edits", type=int, default=0)
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    import registry

    machine = f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {os.cpu_count()} cores"
    t0 = time.perf_counter()
    op = registry.get("gemm", device="cuda")
    get_s = time.perf_counter() - t0
    tune_info = ""
    if args.tune:
        t0 = time.perf_counter()
        result = registry.tune("gemm", shapes=SHAPES, dtypes=["bfloat16"], device="cuda")
        tune_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        registry.tune("gemm", shapes=SHAPES, dtypes=["bfloat16"], device="cuda")
        cached_s = time.perf_counter() - t0
        tune_info = (f"{tune_s:.1f} s ({result.compiled} compiled, {len(result.dropped)} dropped; builds "
                     f"{result.build_seconds:.1f} s, checks and timing {tune_s - result.build_seconds:.1f} s), cached "
                     f"{cached_s:.3f} s; winners {dict(result.winners)}")
        (args.out / "gemm_tune.txt").write_text(str(result) + "\n" + tune_info + "\n")
        print(tune_info, flush=True)
        tune_info += "\n\n" + remeasure(result)
        (args.out / "gemm_tune.txt").write_text(str(result) + "\n" + tune_info + "\n")
        op = registry.get("gemm", device="cuda")
    rows = [] if args.skip_speed else speed(op, args.compile)
    edit = edits(args.edits) if args.edits else None
    command = "python3 " + " ".join(sys.argv)
    text = report(rows, edit, tune_info, machine, command) + f"\nfirst get: {get_s:.1f} s\n"
    (args.out / "gemm.md").write_text(text)
    (args.out / "gemm.json").write_text(json.dumps(dict(rows=rows, edit=edit, tune=tune_info), indent=1,
                                                   default=str))
    print(text)


if __name__ == "__main__":
    main()
