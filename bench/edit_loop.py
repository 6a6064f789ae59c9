"""The edit loop, measured: this registry beside torch.utils.cpp_extension.load
on the same kernel (kernels/axpy), in one run, on one machine.

    python bench/edit_loop.py [--device cpu|cuda] [--reps 3] [--out bench/results]

Steps, each timed from the call to a checked result (medians of --reps where a
step is cheap enough to repeat; the count is in the JSON):
  cold            empty cache and empty ccache, fresh process, `get` (torch: `load`)
  warm_ccache     empty cache dir, warm ccache, fresh process
  new_kernel      a new kernel (a renamed copy) whose op signature was built before
  nochange_fresh  fresh process, nothing changed (excluding `import torch`)
  nochange_same   same process, nothing changed (repeated get)
  source_edit     edit the .cu/.cpp, same process, until the new result is seen
  header_edit     edit a header two includes deep, same process
  revert          go back to the first content, same process
The floors: a bare `nvcc -c` (or `c++ -c`) of the kernel's source with the
flags torch would use, timed in the same run; on the CPU also the very
compile-and-link command the registry ran for the last edit (captured from
builder/direct.py), rerun alone: what an edit costs beyond it is the registry's
own overhead. Writes edit_loop-<device>.json and .md (a table with ratios).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT / "bench"))
from edit_loop_torch import TorchLoadBaseline  # noqa: E402

CHILD_GET = r"""
import json, sys, time
import torch
t0 = time.perf_counter()
import registry
op = registry.get(sys.argv[1], device=sys.argv[2])
t1 = time.perf_counter()
x = torch.ones(8, device=sys.argv[2]); y = torch.ones(8, device=sys.argv[2])
r = op(x, y, 2.0)[0].item()
from registry.builder import step
print(json.dumps({"get_s": t1 - t0, "result": r, "compiles": len(step.builds_run),
                  "outcome": registry.status(sys.argv[1], device=sys.argv[2]).outcome}))
"""


def child_get(name: str, device: str, env: dict) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD_GET, name, device], env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"child get failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


class Scratch:
    """A scratch kernel root with a copy of axpy, and the edits the steps make."""

    def __init__(self, root: Path, name: str, device: str):
        self.dir = root / name
        shutil.copytree(CHECKOUT / "kernels" / "axpy", self.dir)
        self.source = self.dir / ("axpy.cu" if device == "cuda" else "axpy_cpu.cpp")
        self.config = self.dir / "include" / "axpy" / "config.h"
        self.original_source, self.original_config = self.source.read_text(), self.config.read_text()

    def set_source_offset(self, k: int) -> None:
        text = self.original_source.replace("axpy_element(alpha,", f"{k}.0f + axpy_element(alpha,")
        self.source.write_text(text)

    def set_bias(self, k: int) -> None:
        self.config.write_text(self.original_config.replace("#define AXPY_BIAS 0.0f", f"#define AXPY_BIAS {k}.0f"))

    def revert(self) -> None:
        self.source.write_text(self.original_source)
        self.config.write_text(self.original_config)


def median(xs):
    return statistics.median(xs) if xs else None


def bare_compile_floor(scratch: Scratch, device: str, reps: int) -> float:
    inc = [f"-I{scratch.dir}", f"-I{scratch.dir / 'include'}", f"-I{CHECKOUT / 'registry' / 'include'}"]
    out = Path(tempfile.mkdtemp()) / "k.o"
    if device == "cuda":
        import torch

        cap = torch.cuda.get_device_capability()
        arch = f"-gencode=arch=compute_{cap[0]}{cap[1]},code=sm_{cap[0]}{cap[1]}"
        from registry.environment import nvcc_command

        cmd = [nvcc_command(), "-O3", "-lineinfo", arch, "--compiler-options", "'-fPIC'", "-std=c++17",
               "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", *inc, "-c", str(scratch.source), "-o", str(out)]
    else:
        cmd = [os.environ.get("CXX", "c++"), "-O3", "-fPIC", "-std=c++17", *inc, "-c", str(scratch.source), "-o", str(out)]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return median(times)


def one_step_alone(command: list[str]) -> float:
    """The registry's own compile-and-link command for an edit, rerun alone
    in a scratch folder (its output and depfile land there), right after the
    edit that ran it: on a shared machine the pair sees the same load."""
    folder = Path(tempfile.mkdtemp(prefix="one-step-"))
    out = command.index("-o") + 1
    command = [*command[:out], str(folder / "lib.so"), *command[out + 1:]]
    t = time.perf_counter()
    subprocess.run(command, cwd=folder, check=True, capture_output=True)
    elapsed = time.perf_counter() - t
    shutil.rmtree(folder, ignore_errors=True)
    return elapsed


def _capture_direct_commands() -> list[tuple[list[str], float]]:
    """The commands builder/direct.py runs from now on (CPU kernel libraries),
    each with its wall time: an edit's time beyond it is the registry's own."""
    from registry.builder import direct

    seen, run = [], direct._run

    def recording(command, *args, **kwargs):
        t = time.perf_counter()
        try:
            return run(command, *args, **kwargs)
        finally:
            seen.append((list(command), time.perf_counter() - t))

    direct._run = recording
    return seen


def measure_registry(device: str, reps: int, work: Path) -> dict:
    import torch

    results: dict = {}
    kernels = work / "kernels"
    kernels.mkdir()
    scratch = Scratch(kernels, "axpy", device)
    env = dict(os.environ, REGISTRY_KERNELS_PATH=str(kernels), REGISTRY_CACHE_DIR=str(work / "cache"),
               CCACHE_DIR=str(work / "ccache"))
    os.environ.update({k: env[k] for k in ("REGISTRY_KERNELS_PATH", "REGISTRY_CACHE_DIR", "CCACHE_DIR")})

    cold = child_get("axpy", device, env)
    assert cold["result"] == 3.0 and cold["compiles"] >= 2, cold
    results["cold"] = {"s": cold["get_s"], "n": 1}

    # The same content into an empty cache dir: every unit should be a ccache hit.
    warm_env = dict(env, REGISTRY_CACHE_DIR=str(work / "cache2"))
    warm = child_get("axpy", device, warm_env)
    results["warm_ccache"] = {"s": warm["get_s"], "n": 1}

    # A new kernel with a signature built before: only its kernel library compiles.
    shutil.copytree(scratch.dir, kernels / "axpy_new")
    os.environ["CCACHE_DISABLE"] = "1"  # a genuinely new source: ccache cannot help
    new = child_get("axpy_new", device, dict(env, CCACHE_DISABLE="1"))
    del os.environ["CCACHE_DISABLE"]
    assert new["compiles"] == 1, new
    results["new_kernel"] = {"s": new["get_s"], "n": 1}

    fresh = [child_get("axpy", device, env) for _ in range(max(reps, 5))]
    assert all(f["compiles"] == 0 for f in fresh)
    results["nochange_fresh"] = {"s": median([f["get_s"] for f in fresh]), "n": len(fresh)}

    import registry

    op = registry.get("axpy", device=device)
    for _ in range(100):
        registry.get("axpy", device=device)
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(1000):
            registry.get("axpy", device=device)
        samples.append((time.perf_counter() - t) / 1000)
    results["nochange_same"] = {"s": median(samples), "n": 5000}

    x = torch.ones(8, device=device)
    y = torch.ones(8, device=device)

    def until(expected: float) -> float:
        t = time.perf_counter()
        registry.get("axpy", device=device)
        got = op(x, y, 2.0)[0].item()
        elapsed = time.perf_counter() - t
        assert got == expected, (got, expected)
        return elapsed

    commands = _capture_direct_commands() if device == "cpu" else []
    alone: dict[str, list[float]] = {"source_edit": [], "header_edit": []}

    beyond: dict[str, list[float]] = {"source_edit": [], "header_edit": []}

    def paired(step: str, edit, k: int, expected: float) -> float:
        """An edit, then (CPU) the compile+link command it ran, alone."""
        ran = len(commands)
        elapsed = _step(edit, k, until, expected)
        if len(commands) == ran + 1:
            command, compiler_s = commands[-1]
            beyond[step].append(elapsed - compiler_s)
            alone[step].append(one_step_alone(command))
        return elapsed

    source = [paired("source_edit", scratch.set_source_offset, k, 3.0 + k) for k in range(1, reps + 1)]
    results["source_edit"] = {"s": median(source), "n": reps}
    scratch.revert()
    until(3.0)
    header = [paired("header_edit", scratch.set_bias, k, 3.0 + k) for k in range(10, 10 + reps)]
    results["header_edit"] = {"s": median(header), "n": reps}
    for step, samples in (("source_edit", source), ("header_edit", header)):
        if len(alone[step]) == len(samples):
            results[step]["compile_link_alone_s"] = median(alone[step])
            results[step]["beyond_compile_link_s"] = median([a - b for a, b in zip(samples, alone[step])])
            # Within each edit: the whole edit less its compiler process (spawn to exit).
            results[step]["beyond_its_compiler_s"] = median(beyond[step])
            results[step]["beyond_its_compiler_min_s"] = min(beyond[step])
    reverts = []
    for k in range(reps):
        scratch.set_bias(10 + k)
        until(13.0 + k)  # cached from the header-edit step: a revert to that content
        scratch.revert()
        reverts.append(until(3.0))
    results["revert"] = {"s": median(reverts), "n": reps}
    results["floor_bare_compile"] = {"s": bare_compile_floor(scratch, device, reps), "n": reps}
    if alone["source_edit"]:
        both = alone["source_edit"] + alone["header_edit"]
        results["floor_one_step"] = {"s": median(both), "n": len(both), "command": " ".join(commands[-1][0])}
    return results


def _step(edit, k, until, expected):
    edit(k)
    return until(expected)


def table(ours: dict, theirs: dict, device: str) -> str:
    floor = ours["floor_bare_compile"]["s"]
    t_cold = theirs.get("cold", {}).get("s")

    def fmt(s):
        if s is None:
            return "—"
        return f"{s * 1e6:.0f} µs" if s < 1e-3 else (f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s")

    def of_torch_cold(s):
        return f"{s / t_cold:.2f} × torch cold" if t_cold else ""

    def of_floor(s, step=None):
        paired = ours.get(step, {}) if step else {}
        beyond = (f"; {s / paired['compile_link_alone_s']:.2f} × its compile+link run alone beside it; "
                  f"beyond its own compiler process: {paired['beyond_its_compiler_s'] * 1e3:.1f} ms "
                  f"(min {paired['beyond_its_compiler_min_s'] * 1e3:.1f})") if "beyond_its_compiler_s" in paired else ""
        return f"{s / floor:.2f} × bare compile{beyond}"

    rows = [  # label, our key, torch's key, ratio, target
        ("cold build, nothing cached", "cold", "cold", of_torch_cold, "≤ 0.4 × torch cold"),
        ("new kernel, signature built before", "new_kernel", None, of_torch_cold, "≤ 0.15 × torch cold"),
        ("cold into empty cache dir, warm ccache", "warm_ccache", "warm_ccache", of_torch_cold, "≤ 0.25 × torch cold"),
        (".cu/.cpp edit → new result, same process", "source_edit", "source_edit", of_floor, "≤ 1.3 × bare compile"),
        ("header edit → new result, same process", "header_edit", "header_edit", of_floor, "≤ 1.3 × bare compile"),
        ("revert → old result, same process", "revert", "revert", None, "reuse, no compile"),
        ("get, nothing changed, fresh process", "nochange_fresh", "nochange_fresh", None, "≤ 10 ms"),
        ("get, nothing changed, same process", "nochange_same", "nochange_same", None, "≤ 100 µs"),
        ("bare compile of the kernel source (floor)", "floor_bare_compile", None, None, ""),
        ("the registry's compile+link command alone, after each edit (floor)", "floor_one_step", None, None, ""),
    ]
    lines = [f"| step ({device}) | registry | torch load() | ratio | target |", "|---|---|---|---|---|"]
    for label, ours_key, theirs_key, ratio, target in rows:
        if ours_key not in ours:
            continue
        s = ours[ours_key]["s"]
        t = theirs.get(theirs_key, {}) if theirs_key else {}
        their = fmt(t.get("s")) + (f" ({t['note']})" if t.get("note") else "") if theirs_key else ""
        shown = (ratio(s, ours_key) if ratio is of_floor else ratio(s)) if ratio else ""
        lines.append(f"| {label} | {fmt(s)} | {their} | {shown} | {target} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(CHECKOUT / "bench" / "results"))
    ap.add_argument("--torch-reps", type=int, default=None, help="repetitions of torch's steps (default: --reps)")
    ap.add_argument("--skip-torch", action="store_true")
    args = ap.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # Fresh processes should read bytecode as a user's would, even where
    # PYTHONDONTWRITEBYTECODE is set (it is on some CI images).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(CHECKOUT / "registry")], check=False, capture_output=True)
    work = Path(tempfile.mkdtemp(prefix="edit-loop-"))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    load_before = os.getloadavg()  # a shared machine: the figures move with it
    ours = measure_registry(device, args.reps, work)
    theirs = {} if args.skip_torch else TorchLoadBaseline(CHECKOUT, work / "torch", device, args.torch_reps or args.reps).run()
    machine = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or platform.machine()
    meta = {
        "date": started, "device": device, "machine": machine, "cpus": os.cpu_count(),
        "torch": torch.__version__, "python": platform.python_version(),
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "load_average": {"start": [round(v, 2) for v in load_before], "end": [round(v, 2) for v in os.getloadavg()]},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"edit_loop-{device}.json").write_text(json.dumps({"meta": meta, "registry": ours, "torch_load": theirs}, indent=1))
    md = [f"# Edit loop on {device} ({machine})", "",
          f"{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, Python {meta['python']}; "
          f"load average (1, 5, 15 min) {meta['load_average']['start']} at the start, {meta['load_average']['end']} at the end.",
          f"Command: `{meta['command']}`. Medians; repetition counts in edit_loop-{device}.json.", "",
          table(ours, theirs, device), ""]
    (out / f"edit_loop-{device}.md").write_text("\n".join(md))
    print("\n".join(md))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
