"""What does kernels/gemm_nvrtc's epilogue cost an epilogue edit? An edit
relinks the kernel (nvJitLink -lto), and NVVM's time on the kernel is most of
the edit. This compiles the bf16 kernel once with each epilogue, the one it
ships (register_epilogue.cuh: registers to global memory) and CUTLASS's fused
TMA epilogue (-DGEMM_TMA_EPILOGUE=1, kernels/gemm's), and links each with a
new epilogue function in turn, the two interleaved so that a noisy host
weighs on both alike.

    python bench/gemm_epilogue_nvvm.py [--links 3] [--out bench/results]

No GPU is needed. Writes gemm_epilogue_nvvm-<host>.md and .json.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT))
sys.path.insert(0, str(CHECKOUT / "bench"))

import gemm_lto_link as lto  # noqa: E402  (this folder)

KERNEL = "gemm_nvrtc_bf16"
EPILOGUES = {"register (shipped)": [], "CUTLASS TMA (-DGEMM_TMA_EPILOGUE=1)": ["-DGEMM_TMA_EPILOGUE=1"]}


def run(links: int) -> dict:
    opts = lto.options()
    source = lto.units(Path(tempfile.mkdtemp(prefix="gemm-epilogue-nvvm-")))["kernels, bf16 only"]
    compiled = {}
    for name, extra in EPILOGUES.items():
        unit = lto.nvrtc_compile(source, "kernels.cu", opts + extra, lto=True)
        compiled[name] = unit
        print(f"{name}: the kernels' unit compiled in {unit['seconds']:.1f} s", flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in EPILOGUES}
    for i in range(links):
        for name, unit in compiled.items():
            edit = lto.EPILOGUE_UNIT.replace("2.0f", f"{2 + (i + 1) / 1024}f")  # a new epilogue each link
            epilogue = lto.nvrtc_compile(edit, "epilogue.cu", opts[:4], lto=True)["data"]
            link = lto.link([unit["data"], epilogue], [f"-kernels-used={KERNEL}"])
            runs[name].append({k: v for k, v in link.items() if k != "info_log"})
            print(f"{name}: link {link['seconds']:.2f} s (NVVM {link['to_ptx_s']:.2f} s)", flush=True)
    return dict(compilers=lto.compilers(), links=runs,
                compile_s={name: unit["seconds"] for name, unit in compiled.items()})


def report(result: dict, command: str) -> str:
    lines = [f"# kernels/gemm_nvrtc: {KERNEL}'s link with each epilogue", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
             f"{os.cpu_count()} cores, `{command}`", "", f"{result['compilers']}.", "",
             "| epilogue | links | link s (median) | NVVM to PTX s | ptxas and the rest s | cubin bytes "
             "| kernels' unit compile s |", "|---|---|---|---|---|---|---|"]
    medians = {}
    for name, runs in result["links"].items():
        medians[name] = statistics.median(r["seconds"] for r in runs)
        lines.append(f"| {name} | {len(runs)} | {medians[name]:.2f} | "
                     f"{statistics.median(r['to_ptx_s'] for r in runs):.2f} | "
                     f"{statistics.median(r['finish_s'] for r in runs):.2f} | {runs[0]['cubin_bytes']} | "
                     f"{result['compile_s'][name]:.1f} |")
    shipped, tma = medians.values()
    lines += ["", f"Register / TMA epilogue, link time: {shipped / tma:.2f}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", type=int, default=3)
    parser.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results")
    args = parser.parse_args()
    result = run(args.links)
    lto.write_report(args.out, "gemm_epilogue_nvvm", result,
                     report(result, "python bench/gemm_epilogue_nvvm.py " + " ".join(sys.argv[1:])))


if __name__ == "__main__":
    main()
