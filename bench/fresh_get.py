"""`get` with nothing changed in a fresh process, beside torch load(): the
one step of bench/edit_loop.py that is about start-up rather than compiling,
measured on its own (cheap enough to rerun after a start-up change).

    python bench/fresh_get.py [--device cpu|cuda] [--reps 9] [--out bench/results]

Each sample is a new Python process that has imported torch; the clock runs
from `import registry` (torch: the `load()` call) to the op being returned.
The two are sampled in turn (registry, torch, registry, ...). That clock
leaves out load()'s own import (`from torch.utils.cpp_extension import
load`, tens of ms) while counting ours, so it favours load(); the ratio is
read on it. The import is recorded beside it (torch_import_ms) for context.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT / "bench"))
from bench_run import parse_args, run_header, write_results  # noqa: E402
from edit_loop import Scratch, child_get  # noqa: E402
from edit_loop_torch import TorchLoadBaseline  # noqa: E402


def main() -> None:
    args = parse_args(reps=9)
    device = args.device
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(CHECKOUT / "registry")], capture_output=True)
    work = Path(tempfile.mkdtemp(prefix="fresh-get-"))
    (work / "kernels").mkdir()
    Scratch(work / "kernels", "axpy", device)
    env = dict(os.environ, REGISTRY_KERNELS_PATH=str(work / "kernels"), REGISTRY_CACHE_DIR=str(work / "cache"))
    child_get("axpy", device, env)  # build
    torch_base = TorchLoadBaseline(CHECKOUT, work / "torch", device, 1)
    torch_base.child(work / "ext")  # build
    # Interleaved, one sample of each per round: on a shared machine the load
    # drifts over a run, and two back-to-back blocks would each see a different part.
    ours, theirs, imports = [], [], []
    for _ in range(args.reps):
        ours.append(child_get("axpy", device, env))
        sample = torch_base.child(work / "ext")
        theirs.append(sample["load_s"])
        imports.append(sample["import_s"])
    assert all(r["compiles"] == 0 and r["outcome"] == "cache" for r in ours), ours
    result = {
        **run_header(device, f"python bench/fresh_get.py --device {device} --reps {args.reps}"), "reps": args.reps,
        "registry_ms": [r["get_s"] * 1e3 for r in ours], "torch_load_ms": [t * 1e3 for t in theirs],
        "torch_import_ms": [t * 1e3 for t in imports],
    }
    median = {k: statistics.median(result[k]) for k in ("registry_ms", "torch_load_ms", "torch_import_ms")}
    figures = (f"fresh-process get, nothing changed: registry median {median['registry_ms']:.2f} ms, "
               f"torch load() median {median['torch_load_ms']:.2f} ms (n = {args.reps}), "
               f"ratio {median['registry_ms'] / median['torch_load_ms']:.2f} "
               f"(load()'s own import, not counted: median {median['torch_import_ms']:.1f} ms)")
    write_results(args.out, "fresh_get", result, figures)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
