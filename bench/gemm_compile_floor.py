"""Can anything compile kernels/gemm_nvrtc's kernel below NVVM's floor
without losing its performance? One kernel (bf16), compiled from source by
NVRTC under each option that trades optimization or whole-program code
generation for compile time, and linked by nvJitLink from LTO-IR and from
PTX; for each, the time and what ptxas reports about the code: registers,
spills, whether `setmaxnreg` (the warp-specialized kernel's register
reallocation) was kept, whether wgmma was serialized, and the kernel's SASS
size beside the default build's.

    python bench/gemm_compile_floor.py [--slow] [--out bench/results]

No GPU is needed (NVRTC and nvJitLink come with torch's CUDA wheels). The
compiles run one after the other (NVRTC's phases are wall clock). --slow adds
the link at NVVM -opt=0 (about 3 minutes on 2 cores). Writes
gemm_compile_floor-<host>.md and .json.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import json
import os
import platform
import re
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm_lto_link as lto  # noqa: E402  (this folder: NVRTC's options for the kernel, nvJitLink)

KERNEL = "gemm_nvrtc_bf16"
_PTX, _LTOIR = 2, 3  # nvJitLinkInputType
# ptxas's notes that a kernel lost performance, by the codes it prints.
LOSSES = {
    "C7504": "setmaxnreg ignored",
    "C7507": "wgmma serialized",
    "C7508": "wgmma serialized",
    "C7509": "wgmma serialized (extern call)",
    "C7510": "wgmma serialized",
    "C7511": "wgmma serialized (registers)",
}


def bf16_unit(work: Path) -> str:
    """The bf16 kernel with its epilogue, as one unit (the f16 entry cut off)."""
    device = (lto.KERNEL_DIR / "gemm_device.cu").read_text()
    cut = device.index('extern "C" __global__ void __launch_bounds__(KernelF16')
    (work / "bf16_kernel.cu").write_text(device[:cut])
    return '#include "gemm_nvrtc/nvrtc_std.cuh"\n#include "gemm_nvrtc/types.cuh"\n' \
           f'#include "{work / "bf16_kernel.cu"}"\n#include "{lto.KERNEL_DIR / "gemm_epilogue.cu"}"\n'


def ptxas_report(log: str) -> dict:
    """What `-Xptxas=-v` said about the kernel: registers, spill bytes, the losses."""
    regs = re.search(rf"Function properties for {KERNEL}\n.*?(\d+) bytes spill stores.*?Used (\d+) registers",
                     log, re.S)
    codes = sorted(set(re.findall(r"\((C\d{4})\)", log)) & set(LOSSES))
    return {"registers": int(regs.group(2)) if regs else None, "spill_bytes": int(regs.group(1)) if regs else None,
            "losses": [f"{c} {LOSSES[c]}" for c in codes]}


def sass_bytes(cubin: bytes) -> int | None:
    """Size of the kernel's .text section in an ELF cubin."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    for name, _, _, _, _, size in sections:
        if cubin[names_at + name:cubin.index(b"\0", names_at + name)] == f".text.{KERNEL}".encode():
            return size
    return None


@contextlib.contextmanager
def _stderr_kept():
    """What native code writes on fd 2 meanwhile, as printed[0] after the block."""
    printed = [""]
    with tempfile.TemporaryFile() as kept:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(kept.fileno(), 2)
        try:
            yield printed
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            kept.seek(0)
            printed[0] = kept.read().decode(errors="replace")


def compile_(source: str, opts: list[str], output: str) -> dict:
    """One NVRTC compile: seconds, NVRTC's phases, the output and its log."""
    from registry.device import nvrtc as nvrtc_lib
    from registry.device.pch_server import read_phases

    lib = nvrtc_lib.load()._open()
    table = Path(os.environ.get("TMPDIR", "/tmp")) / f"nvrtc-time-{os.getpid()}.csv"
    table.unlink(missing_ok=True)
    opts = opts + [f"--time={table}", "-Xptxas=-v"]
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"bf16_unit.cu", 0, None, None) == 0
    with _stderr_kept() as printed:  # NVRTC's ptxas prints its notes (C7504, ...) on fd 2, not in the log
        start = time.perf_counter()
        result = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]))
        seconds = time.perf_counter() - start
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if result != 0:
        raise SystemExit(f"NVRTC failed with {opts[-3:]}:\n{log.value.decode()[-3000:]}")
    get_size, get = {"cubin": (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN),
                     "ltoir": (lib.nvrtcGetLTOIRSize, lib.nvrtcGetLTOIR),
                     "ptx": (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)}[output]
    get_size(prog, ctypes.byref(size))
    data = ctypes.create_string_buffer(size.value)
    get(prog, data)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return {"seconds": seconds, "phases_s": read_phases(str(table)), "data": data.raw,
            "log": log.value.decode(errors="replace") + printed[0]}


def link(data: bytes, kind: int, opts: list[str]) -> dict:
    """nvJitLink of one input to a cubin: seconds, the cubin, ptxas's log."""
    fn = lto._jitlink()
    handle = ctypes.c_void_p()
    opts = [f"-arch={lto.ARCH}", "-Xptxas=-v", *opts]
    assert fn("nvJitLinkCreate")(ctypes.byref(handle), len(opts),
                                 (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])) == 0
    start = time.perf_counter()  # before AddData: a PTX input is assembled there
    assert fn("nvJitLinkAddData")(handle, kind, data, ctypes.c_size_t(len(data)), b"unit") == 0
    result = fn("nvJitLinkComplete")(handle)
    seconds = time.perf_counter() - start
    logs, size = lto.link_logs(fn, handle), ctypes.c_size_t()
    if result != 0:
        raise SystemExit(f"nvJitLink failed with {opts}:\n{logs[0][-3000:]}")
    fn("nvJitLinkGetLinkedCubinSize")(handle, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    fn("nvJitLinkGetLinkedCubin")(handle, cubin)
    fn("nvJitLinkDestroy")(ctypes.byref(handle))
    return {"seconds": seconds, "data": cubin.raw, "log": "\n".join(logs)}


def row(label: str, how: str, done: dict, cubin: bytes) -> dict:
    phases = done.get("phases_s", {})
    return {"label": label, "how": how, "seconds": round(done["seconds"], 2),
            "nvvm_s": sum(v for k, v in phases.items() if k.startswith("NVVM")) or None,
            "ptx_s": sum(v for k, v in phases.items() if k.startswith("PTX")) or None,
            "sass_bytes": sass_bytes(cubin), **ptxas_report(done["log"])}


def run(work: Path, slow: bool) -> list[dict]:
    opts, source, rows = lto.options(), bf16_unit(work), []
    for label, extra in [("today's options", []), ("--Ofast-compile=min", ["--Ofast-compile=min"]),
                         ("--Ofast-compile=mid", ["--Ofast-compile=mid"]),
                         # --Ofast-compile=max is left out: on the 2-core machine it ran past 8 minutes and
                         # 23 GB of memory (all the machine had) and was stopped.
                         ("-rdc=true (relocatable, nothing extern)", ["-rdc=true"])]:
        done = compile_(source, opts + extra, "cubin")
        rows.append(row(label, "NVRTC from source", done, done["data"]))
        print(rows[-1], flush=True)
    ir = compile_(source, opts + ["-dlto", "-rdc=true"], "ltoir")
    print(f"LTO-IR: {ir['seconds']:.1f} s", flush=True)
    for level in ["3", "2", "1"] + (["0"] if slow else []):
        done = link(ir["data"], _LTOIR, ["-lto", f"-Xnvvm=-opt={level}"])
        rows.append(row(f"LTO-IR, NVVM -opt={level}", "nvJitLink -lto", done, done["data"]))
        print(rows[-1], flush=True)
    ptx = compile_(source, [o.replace(f"-arch={lto.ARCH}", "-arch=compute_90a") for o in opts], "ptx")
    done = link(ptx["data"].rstrip(b"\0") + b"\0", _PTX, [])
    rows.append(row("PTX (compiled once, NVVM's time not counted)", "nvJitLink", done, done["data"]))
    return rows


def report(rows: list[dict], command: str) -> str:
    base = rows[0]["sass_bytes"]
    lines = ["# kernels/gemm_nvrtc's bf16 kernel: what each compile option costs and keeps", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
             f"{os.cpu_count()} cores, `{command}`", "",
             "| build | by | s | NVVM s | PTX s | registers | spill bytes | SASS / today's | ptxas's losses |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['sass_bytes'] / base:.2f}" if r["sass_bytes"] and base else "-"
        nvvm = f"{r['nvvm_s']:.2f}" if r["nvvm_s"] else "-"
        ptx = f"{r['ptx_s']:.2f}" if r["ptx_s"] else "-"
        lines.append(f"| {r['label']} | {r['how']} | {r['seconds']:.2f} | {nvvm} | {ptx} | {r['registers']} | "
                     f"{r['spill_bytes']} | {ratio} | {'; '.join(r['losses']) or 'none'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", action="store_true", help="also link at NVVM -opt=0 (minutes)")
    parser.add_argument("--out", type=Path, default=lto.CHECKOUT / "bench" / "results")
    args = parser.parse_args()
    rows = run(Path(tempfile.mkdtemp(prefix="gemm-floor-")), args.slow)
    text = report(rows, "python bench/gemm_compile_floor.py " + " ".join(sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    host = "cuda" if Path("/dev/nvidia0").exists() else "cpu"
    (args.out / f"gemm_compile_floor-{host}.json").write_text(json.dumps(rows, indent=1))
    (args.out / f"gemm_compile_floor-{host}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
