"""A cached `get` in a fresh process on two trees of this repository, beside
torch load(), interleaved in one run: is the newer tree's start-up any
slower, and does it import more of the package?

    python bench/fresh_get_trees.py --old DIR [--reps 15] [--out bench/results]

DIR is a checkout of the older tree with its C++ core built (registry/_core
importable there). Each tree gets its own copy of its own kernels/axpy and
its own cache; after one building get each, every sample is a new Python
process that has imported torch, the clock running from `import registry`
to the op being returned (as bench/fresh_get.py), then the count of
registry modules the process holds. load()'s sample is bench/fresh_get.py's.
The three take turns, one sample each per round, the two trees
swapping which goes first. Writes
fresh_get_trees-<device>.json and .md to --out.
"""
from __future__ import annotations

import argparse
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
sys.path.insert(0, str(CHECKOUT / "bench"))
from edit_loop_torch import TorchLoadBaseline  # noqa: E402

# Tree-agnostic: nothing here names a module that one tree has and the other not.
CHILD = r"""
import json, sys, time
import torch
t0 = time.perf_counter()
import registry
op = registry.get("axpy", device=sys.argv[1])
t1 = time.perf_counter()
x = torch.ones(8, device=sys.argv[1])
assert op(x, x, 2.0)[0].item() == 3.0
modules = sorted(m for m in sys.modules if m == "registry" or m.startswith("registry."))
print(json.dumps({"get_s": t1 - t0, "modules": modules, "outcome": registry.status("axpy", device=sys.argv[1]).outcome}))
"""


def child(tree: Path, device: str, work: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), REGISTRY_KERNELS_PATH=str(work / "kernels"),
               REGISTRY_CACHE_DIR=str(work / "cache"))
    done = subprocess.run([sys.executable, "-c", CHILD, device], env=env, cwd=work, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"the get on {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def git_head(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results")
    args = ap.parse_args()
    import torch

    trees = {"old": args.old.resolve(), "new": CHECKOUT}
    scratch = Path(tempfile.mkdtemp(prefix="fresh-get-trees-"))
    works = {}
    for label, tree in trees.items():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "registry")], capture_output=True)
        work = works[label] = scratch / label
        shutil.copytree(tree / "kernels" / "axpy", work / "kernels" / "axpy")
        child(tree, args.device, work)  # builds
    torch_base = TorchLoadBaseline(CHECKOUT, scratch / "torch", args.device, 1)
    torch_base.child(scratch / "ext")  # builds
    samples = {"old": [], "new": [], "load": []}
    modules = {}
    for round_ in range(args.reps):
        # Each tree goes first in every other round: whatever the first sample of
        # a round pays (a colder page cache, a clock ramping up) falls on both.
        for label, tree in (list(trees.items()) if round_ % 2 == 0 else list(trees.items())[::-1]):
            got = child(tree, args.device, works[label])
            assert got["outcome"] == "cache", got
            samples[label].append(got["get_s"] * 1e3)
            modules[label] = got["modules"]
        samples["load"].append(torch_base.child(scratch / "ext")["load_s"] * 1e3)
    med = {k: statistics.median(v) for k, v in samples.items()}
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "device": args.device, "torch": torch.__version__,
              "trees": {k: git_head(v) for k, v in trees.items()}, "reps": args.reps,
              "command": f"python bench/fresh_get_trees.py --old DIR --device {args.device} --reps {args.reps}",
              "ms": samples, "median_ms": med, "modules": modules}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"fresh_get_trees-{args.device}.json").write_text(json.dumps(result, indent=1))
    lines = [f"# A cached get in a fresh process, two trees and load() in one run ({args.device})", "",
             f"{result['date']}, torch {result['torch']}, {os.cpu_count()} CPUs, {args.reps} rounds, "
             f"one sample of each per round. Command: `{result['command']}` (old = {result['trees']['old']}, "
             f"new = {result['trees']['new']}).", "",
             "| | median ms | min ms | / load() | registry modules imported |", "|---|---|---|---|---|"]
    for label in ("old", "new", "load"):
        count = str(len(modules[label])) if label in modules else "-"
        lines.append(f"| {label if label != 'load' else 'torch load()'} | {med[label]:.2f} | "
                     f"{min(samples[label]):.2f} | {med[label] / med['load']:.2f} | {count} |")
    extra = sorted(set(modules["new"]) - set(modules["old"]))
    lines += ["", f"Modules the new tree imports that the old did not: {', '.join(extra) or 'none'}."]
    (args.out / f"fresh_get_trees-{args.device}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
