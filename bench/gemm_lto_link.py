"""What does linking kernels/gemm_nvrtc's epilogue cost? Its kernels compiled
once to LTO-IR (NVRTC -dlto -rdc=true), the epilogue (gemm_nvrtc::epilogue,
a __device__ function the kernels call, gemm_epilogue.cu) compiled alone on
each edit, and the two linked by nvJitLink (-lto): an edit skips the front
end and pays the link. This measures that link, whole and a kernel at a
time, beside what an edit of one unit (the epilogue compiled with the
kernels) pays: NVVM + ptxas of the whole unit (NVRTC's own --time phases),
in the same run.

    python bench/gemm_lto_link.py [--links 2] [--out bench/results]
        [--quick]          the kernels' units only (both dtypes; bf16 alone), no
                           whole-unit compile
        [--split 8 0]      each link again with -split-compile-extended=N (NVVM
                           and ptxas over N threads; 0: every core), and the
                           whole unit again with NVRTC's -split-compile (the
                           first N)

No GPU is needed (NVRTC and nvJitLink come with torch's CUDA wheels). Writes
gemm_lto_link-<host>.md and .json.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import itertools
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT))

KERNEL_DIR = CHECKOUT / "kernels" / "gemm_nvrtc"
ARCH = "sm_90a"
EPILOGUE_UNIT = ("namespace gemm_nvrtc { __device__ float epilogue(float value); }\n"
                 "__device__ float gemm_nvrtc::epilogue(float value) { return value * 2.0f; }\n")
_LTOIR = 3  # NVJITLINK_INPUT_LTOIR
KERNELS = ["gemm_nvrtc_bf16", "gemm_nvrtc_f16"]  # gemm_device.cu's entry points
WHOLE = "whole unit (an edit of one unit)"  # the kernels and the epilogue compiled together


def options() -> list[str]:
    """The registry's NVRTC options and include paths for kernels/gemm_nvrtc."""
    from registry import _core, header_packages
    from registry.device import nvrtc as nvrtc_lib
    from registry.device.nvrtc_device import SHIM_DIR, nvrtc_options
    from registry.device.nvrtc_pch import cccl_options, cccl_root

    manifest = _core.parse_manifest(str(KERNEL_DIR / "kernel.toml"))
    nv = nvrtc_lib.load()
    dirs = [KERNEL_DIR / "include", KERNEL_DIR, *header_packages.find("nvidia-cutlass").include_dirs, SHIM_DIR,
            nv.include_dir]
    return nvrtc_options(manifest, ARCH) + [f"-I{d}" for d in dirs] + cccl_options(cccl_root(nv.include_dir))


def nvrtc_compile(source: str, name: str, opts: list[str], lto: bool) -> dict:
    """One NVRTC compile: seconds, the output's size, NVRTC's phases (--time)."""
    from registry.device import nvrtc as nvrtc_lib
    from registry.device.pch_server import read_phases

    lib = nvrtc_lib.load()._open()
    table = os.path.join(tempfile.mkdtemp(prefix="nvrtc-time-"), "time.csv")
    opts = opts + [f"--time={table}"] + (["-dlto", "-rdc=true"] if lto else [])
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None) == 0
    t0 = time.perf_counter()
    result = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]))
    seconds = time.perf_counter() - t0
    size = ctypes.c_size_t()
    if result != 0:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        raise SystemExit(f"{name} did not compile:\n{log.value.decode()[-3000:]}")
    get_size, get = (lib.nvrtcGetLTOIRSize, lib.nvrtcGetLTOIR) if lto else (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
    get_size(prog, ctypes.byref(size))
    data = ctypes.create_string_buffer(size.value)
    get(prog, data)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return dict(seconds=seconds, bytes=size.value, phases_s=read_phases(table), data=data.raw)


def compilers() -> str:
    """Which NVRTC and nvJitLink ran (their wheels' versions): NVVM's time
    may differ between releases, and the GPU image's are not the
    development machine's."""
    from registry.device import nvjitlink
    from registry.device import nvrtc as nvrtc_lib

    nvrtc = nvrtc_lib.load()
    linker = nvjitlink.load(nvrtc.library)
    return f"NVRTC {nvrtc.distribution or nvrtc.library}, nvJitLink {linker.distribution or linker.library}"


def _jitlink():
    from registry.device import nvrtc as nvrtc_lib

    folder = Path(nvrtc_lib.load().library).parent
    found = sorted(folder.glob("libnvJitLink.so*"))
    if not found:
        raise SystemExit(f"no libnvJitLink.so beside NVRTC in {folder}: pip install nvidia-nvjitlink")
    lib = ctypes.CDLL(str(found[0]))
    major = found[0].name.rpartition(".so.")[2].split(".")[0]
    # nvJitLink's entry points are versioned symbols (the header maps nvJitLinkX to __nvJitLinkX_<major>_0).
    return lambda name: getattr(lib, f"__{name}_{major}_0")


def link_logs(fn, handle) -> list[str]:
    """A link's error log and info log (ptxas's notes go to the info log)."""
    logs, size = [], ctypes.c_size_t()
    for what in ("Error", "Info"):
        fn(f"nvJitLinkGet{what}LogSize")(handle, ctypes.byref(size))
        text = ctypes.create_string_buffer(size.value + 1)
        fn(f"nvJitLinkGet{what}Log")(handle, text)
        logs.append(text.value.decode(errors="replace"))
    return logs


def link(irs: list[bytes], extra: list[str] = ()) -> dict:
    """nvJitLink -lto of LTO-IR units to a cubin: seconds, and its own split
    (-time: NVVM to PTX, then ptxas and the rest)."""
    fn = _jitlink()
    handle = ctypes.c_void_p()
    from registry.device.lto_link import LINK_OPTIONS

    opts = [f"-arch={ARCH}", *LINK_OPTIONS, "-time", *extra]  # the registry's (runs before 0ef13cb: -lto alone)
    assert fn("nvJitLinkCreate")(ctypes.byref(handle), len(opts),
                                 (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])) == 0
    for i, ir in enumerate(irs):
        assert fn("nvJitLinkAddData")(handle, _LTOIR, ir, ctypes.c_size_t(len(ir)), f"unit{i}".encode()) == 0
    t0 = time.perf_counter()
    result = fn("nvJitLinkComplete")(handle)
    seconds = time.perf_counter() - t0
    size = ctypes.c_size_t()
    logs = link_logs(fn, handle)
    if result != 0:
        raise SystemExit(f"nvJitLink failed ({result}):\n{logs[0][-3000:]}")
    fn("nvJitLinkGetLinkedCubinSize")(handle, ctypes.byref(size))
    fn("nvJitLinkDestroy")(ctypes.byref(handle))
    ms = dict(re.findall(r"nvJitLinkComplete time to (create PTX|finish): ([\d.]+)", logs[1]))
    return dict(seconds=seconds, cubin_bytes=size.value, to_ptx_s=float(ms.get("create PTX", "nan")) / 1e3,
                finish_s=float(ms.get("finish", "nan")) / 1e3, info_log=logs[1][-800:])


def _link_kernel(irs: list[bytes], kernel: str) -> dict:
    return link(irs, [f"-kernels-used={kernel}"])


def side_by_side(irs: list[bytes], kernels: list[str], how: str = "threads") -> dict:
    """One link per kernel (-kernels-used=K: NVVM and ptxas over that kernel
    alone), all at once: on threads (ctypes lets go of the GIL), as a linked
    edit links once the kernels are known (registry/device/lto_link.py), or in
    forked processes (how="processes"), to see whether threads of one process
    slow each other. The per-kernel PTX cannot instead be merged and assembled
    once through nvJitLink: a PTX input is assembled as relocatable code, and
    ptxas drops the kernels' setmaxnreg (C7504)."""
    import multiprocessing
    import threading

    runs: dict[str, dict] = {}
    t0 = time.perf_counter()
    if how == "processes":
        with multiprocessing.get_context("fork").Pool(len(kernels)) as pool:
            runs = dict(zip(kernels, pool.starmap(_link_kernel, [(irs, k) for k in kernels])))
    else:
        threads = [threading.Thread(target=lambda k=k: runs.__setitem__(k, _link_kernel(irs, k))) for k in kernels]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    seconds = time.perf_counter() - t0
    if len(runs) != len(kernels):
        raise SystemExit("a per-kernel link failed")
    return dict(seconds=seconds, cubin_bytes=sum(r["cubin_bytes"] for r in runs.values()),
                to_ptx_s=max(r["to_ptx_s"] for r in runs.values()), finish_s=max(r["finish_s"] for r in runs.values()))


def units(work: Path) -> dict[str, str]:
    """The whole unit as an edit compiled it before the epilogue was linked
    (the kernels with the epilogue in one unit), and the kernels without it
    (both dtypes; bf16 alone), by mirror paths under work."""
    device = (KERNEL_DIR / "gemm_device.cu").read_text()
    assert '#include "gemm_epilogue' not in device, "gemm_device.cu includes the epilogue again: update this benchmark"
    bf16_only = device[:device.index('extern "C" __global__ void __launch_bounds__(KernelF16')]
    (work / "kernels_bf16.cu").write_text(bf16_only)
    prelude = f'#include "{KERNEL_DIR / "gemm_prelude.cuh"}"\n'
    kernels = prelude + f'#include "{KERNEL_DIR / "gemm_device.cu"}"\n'
    return {WHOLE: kernels + f'#include "{KERNEL_DIR / "gemm_epilogue.cu"}"\n',
            "kernels, both dtypes": kernels,
            "kernels, bf16 only": '#include "gemm_nvrtc/nvrtc_std.cuh"\n' + f'#include "{work / "kernels_bf16.cu"}"\n'}


def run(links: int, splits: list[int], quick: bool = False) -> dict:
    opts = options()
    work = Path(tempfile.mkdtemp(prefix="gemm-lto-"))
    sources = units(work)
    if quick:
        sources = {label: sources[label] for label in ("kernels, both dtypes", "kernels, bf16 only")}
    whole = WHOLE
    for n in splits[:1]:  # a whole compile is minutes: the first N only
        sources[f"{whole}, -split-compile={n}"] = sources[whole]
    def split_option(label: str) -> list[str]:
        return ["-split-compile=" + label.rpartition("=")[2]] if "split" in label else []

    # One at a time: NVRTC's phases are wall clock, and compiles side by side would share the cores.
    compiled = {label: nvrtc_compile(source, f"unit{i}.cu", opts + split_option(label),
                                     lto=not label.startswith("whole"))
                for i, (label, source) in enumerate(sources.items())}
    edits = itertools.count(1)

    def edited() -> bytes:
        """A new epilogue for each link, as an edit brings: on an H100 a
        second link of the same two units in the process took 1.1-1.6 s with
        no NVVM time (nvJitLink reused earlier work; forked children did not)."""
        unit = EPILOGUE_UNIT.replace("2.0f", f"{2 + next(edits) / 1024}f")
        return nvrtc_compile(unit, "epilogue.cu", opts[:4], lto=True)["data"]

    epilogue = nvrtc_compile(EPILOGUE_UNIT, "epilogue.cu", opts[:4], lto=True)
    result = {"compilers": compilers(),
              "compiles": {k: {n: v for n, v in c.items() if n != "data"} for k, c in compiled.items()},
              "epilogue_compile_s": epilogue["seconds"], "links": {}}
    kernels = {label: compiled[label]["data"] for label in ("kernels, both dtypes", "kernels, bf16 only")}
    result["links"]["kernels, both dtypes, a link per kernel side by side (-kernels-used)"] = [
        side_by_side([kernels["kernels, both dtypes"], edited()], KERNELS) for _ in range(links)]
    result["links"]["kernels, both dtypes, a link per kernel side by side in processes"] = [
        side_by_side([kernels["kernels, both dtypes"], edited()], KERNELS, "processes") for _ in range(links)]
    for kernel in KERNELS:  # the floor of an edit: the edited kernel's NVVM and ptxas alone
        result["links"][f"kernels, both dtypes, {kernel} alone (-kernels-used)"] = [
            _link_kernel([kernels["kernels, both dtypes"], edited()], kernel) for _ in range(links)]
    for label, ir in kernels.items():
        for n in [None, *splits]:
            extra = [] if n is None else [f"-split-compile-extended={n}"]
            name = label + ("" if n is None else f", -split-compile-extended={n}")
            result["links"][name] = [link([ir, edited()], extra) for _ in range(links)]
    return result


def report(result: dict, command: str) -> str:
    lines = ["# kernels/gemm_nvrtc: the epilogue as its own unit, linked with nvJitLink -lto", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
             f"{os.cpu_count()} cores, `{command}`", "", f"{result['compilers']}.", ""]
    if WHOLE in result["compiles"]:
        whole = result["compiles"][WHOLE]["phases_s"]
        nvvm = sum(v for k, v in whole.items() if k.startswith("NVVM"))
        ptx = sum(v for k, v in whole.items() if k.startswith("PTX"))
        floor, floor_name = nvvm + ptx, "one unit's floor"
        lines.append(f"An edit of one unit compiles it whole; its floor (NVRTC --time, both kernels): NVVM "
                     f"{nvvm:.2f} s + PTX {ptx:.2f} s = {floor:.2f} s.")
    else:  # --quick: against the link of one kernel alone, an edit's floor
        alone = result["links"][f"kernels, both dtypes, {KERNELS[0]} alone (-kernels-used)"]
        floor, floor_name = statistics.median(r["seconds"] for r in alone), f"{KERNELS[0]} alone"
    lines += [f"The epilogue unit alone: {result['epilogue_compile_s']:.3f} s.", "",
              "| linked with the epilogue | links | link s (median) | NVVM to PTX s | ptxas and the rest s | "
              f"link / {floor_name} |", "|---|---|---|---|---|---|"]
    for label, runs in result["links"].items():
        median = statistics.median(r["seconds"] for r in runs)
        lines.append(f"| {label} | {len(runs)} | {median:.2f} | "
                     f"{statistics.median(r['to_ptx_s'] for r in runs):.2f} | "
                     f"{statistics.median(r['finish_s'] for r in runs):.2f} | {median / floor:.2f} |")
    for label, compile_ in result["compiles"].items():
        if "split" in label:
            phases = compile_["phases_s"]
            lines.append(f"\n{label}: NVVM {sum(v for k, v in phases.items() if k.startswith('NVVM')):.2f} s + PTX "
                         f"{sum(v for k, v in phases.items() if k.startswith('PTX')):.2f} s "
                         f"(compile {compile_['seconds']:.2f} s).")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", type=int, default=2)
    parser.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results")
    parser.add_argument("--split", type=int, nargs="*", default=[])
    parser.add_argument("--quick", action="store_true",
                        help="the kernels' units only (both dtypes; bf16 alone), no whole-unit compile")
    args = parser.parse_args()
    result = run(args.links, args.split, args.quick)
    write_report(args.out, "gemm_lto_link", result,
                 report(result, "python bench/gemm_lto_link.py " + " ".join(sys.argv[1:])))


def write_report(out: Path, name: str, result: dict, text: str) -> None:
    """<name>-<host>.json (every figure) and .md (the report, also printed);
    host is cuda where a GPU is visible, else cpu: these runs need none."""
    out.mkdir(parents=True, exist_ok=True)
    host = "cuda" if os.environ.get("CUDA_VISIBLE_DEVICES") or Path("/dev/nvidia0").exists() else "cpu"
    (out / f"{name}-{host}.json").write_text(json.dumps(result, indent=1))
    (out / f"{name}-{host}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
