"""The shared binding's build beside a per-signature binding's, through
torch.utils.cpp_extension.load with the same flags, ccache off, interleaved.

    python3 bench/binding_build.py --old-source OLD.cpp [--reps 3] [--out bench/results]

OLD.cpp is a binding an earlier tree generated for one signature (one module
per signature, TORCH_LIBRARY in it), e.g. from the tree before the shared
binding: its core's generate_binding(parse_signature(...), "cpu", "kreg_old").
The shared binding is this tree's _core.generate_shared_binding(backend).
Each build gets a fresh build folder and module name. Writes
binding_build-<backend>.md/.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def build_seconds(source: Path, name: str) -> float:
    from torch.utils import cpp_extension

    folder = Path(tempfile.mkdtemp(prefix="binding_build_"))
    start = time.perf_counter()
    cpp_extension.load(name=name, sources=[str(source)], extra_cflags=["-O2"], build_directory=str(folder),
                       extra_include_paths=[str(CHECKOUT / "registry" / "include")], is_python_module=False,
                       with_cuda=False, verbose=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old-source", type=Path, required=True)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results")
    args = parser.parse_args()
    os.environ["CCACHE_DISABLE"] = "1"
    import torch

    from registry import _core

    work = Path(tempfile.mkdtemp(prefix="binding_sources_"))
    shared = work / "shared_binding.cpp"
    shared.write_text(_core.generate_shared_binding(args.backend))
    times = {"per_signature": [], "shared": []}
    for rep in range(args.reps):
        # A fresh module name each time: load() keeps one module per name in a process.
        old = work / f"old_{rep}.cpp"
        old.write_text(args.old_source.read_text().replace("kreg_oldbinding0001", f"kreg_oldbinding{rep:04d}x"))
        times["per_signature"].append(build_seconds(old, f"kreg_oldbinding{rep:04d}x"))
        copy = work / f"shared_{rep}.cpp"
        copy.write_text(shared.read_text())
        times["shared"].append(build_seconds(copy, f"kreg_shared_bench_{rep}"))
    medians = {k: statistics.median(v) for k, v in times.items()}
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch.__version__,
              "machine": f"{platform.node()} ({os.cpu_count()} cpus)", "backend": args.backend, "times_s": times,
              "median_s": medians, "shared_over_per_signature": medians["shared"] / medians["per_signature"]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"binding_build-{args.backend}.json").write_text(json.dumps(result, indent=2) + "\n")
    text = (f"# The shared binding's build beside a per-signature binding's ({args.backend})\n\n"
            f"{result['date']}, {result['machine']}, torch {result['torch']}, ccache off, "
            f"{args.reps} interleaved builds each. Command: `python3 bench/binding_build.py --old-source OLD.cpp "
            f"--backend {args.backend} --reps {args.reps}`\n\n"
            f"| binding | median build | all |\n|---|---|---|\n"
            f"| per signature (before) | {medians['per_signature']:.2f} s | "
            f"{', '.join(f'{t:.2f}' for t in times['per_signature'])} |\n"
            f"| shared, every signature | {medians['shared']:.2f} s | {', '.join(f'{t:.2f}' for t in times['shared'])} |\n\n"
            f"shared / per signature: {result['shared_over_per_signature']:.2f}\n")
    (args.out / f"binding_build-{args.backend}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
