"""The edit loop of device code through NVRTC (kernels/axpy_nvrtc) and
through `nvcc -cubin` (axpy_cubin: axpy_nvrtc with its compiler line
switched, bench/derived_kernels.py), beside the nvcc -c path and torch's
load() measured in the same run.

    python bench/nvrtc_edit_loop.py --device cpu  [--reps 7] [--out bench/results]
    python bench/nvrtc_edit_loop.py --device cuda [--reps 5] [--torch-reps 2] [--out bench/results]

--device cpu (no GPU needed): each step is timed from the edit to a new,
cached cubin (the device half of `get`: scan, snapshot, key, compile, publish):
  device_edit     edit axpy_device.cu
  header_edit     edit include/axpy_nvrtc/config.h (stale = a cubin seen before)
  cubin_device_edit, cubin_header_edit
                  the same through nvcc -cubin (axpy_cubin), when nvcc is installed
  floors          NVRTC alone on the same unit, each time new source (with the
                  registry's options, and in one thread); `nvcc -cubin` and `nvcc -c` of
                  kernels/axpy/axpy.cu, and `nvcc -cubin` of kernels/axpy_nvrtc's
                  device code (nvcc_cubin_axpy_cubin), when nvcc is installed
--device cuda: each step is timed from the edit to a checked result of the op:
  device_edit, header_edit (stale = an old value), host_edit (axpy_launch.cpp),
  nvcc_cubin_edit, nvcc_cubin_header_edit (axpy_cubin: nvcc -cubin),
  nvcc_edit (kernels/axpy's .cu through the nvcc -c path: the comparison),
  cold_get (a renamed copy of axpy_nvrtc in a fresh process: its signature was
  built before), the same floors as --device cpu (for this GPU's arch), and
  torch load()'s source and header edits of kernels/axpy
  (bench/edit_loop_torch.py; --torch-reps of each, 20-40 s a build).
Each step's result is printed as it completes; at the end, writes
nvrtc_edit_loop-<device>.json and .md with medians. `--device cuda --reps 5`
takes about 4-5 minutes on a 16-core machine, most of it torch's builds.
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
sys.path.insert(0, str(CHECKOUT))
sys.path.insert(0, str(CHECKOUT / "bench"))

from derived_kernels import DERIVED, write as write_derived  # noqa: E402 (needs the paths above)


def median(xs):
    return statistics.median(xs) if xs else None


class Steps(dict):
    """The results, each printed (and flushed) when its step completes: a run
    cut short still shows what it measured."""

    def __setitem__(self, name, result) -> None:
        super().__setitem__(name, result)
        if isinstance(result, dict) and "s" in result:
            print(f"step {name}: {result['s']:.3f} s median of {result['n']}"
                  + (f", stale {result['stale']}" if "stale" in result else ""), flush=True)
        elif isinstance(result, dict):
            for inner, r in result.items():
                print(f"step {name}: {inner}: " + (f"{r['s']:.3f} s median of {r['n']}" if isinstance(r, dict)
                                                   and r.get("s") is not None else str(r)), flush=True)


class Copy:
    def __init__(self, root: Path, source: str, name: str):
        """A copy of kernels/<source>, or of a derived kernel (bench/derived_kernels.py)."""
        if source in DERIVED:
            self.dir = write_derived(root, source)
            assert name == source, "a derived kernel is written under its own name"
        else:
            self.dir = root / name
            shutil.copytree(CHECKOUT / "kernels" / source, self.dir)
        self.originals: dict[Path, str] = {}

    def write(self, relative: str, old: str, new: str) -> None:
        path = self.dir / relative
        original = self.originals.setdefault(path, path.read_text())
        assert old in original, (old, path)
        path.write_text(original.replace(old, new, 1))

    def revert(self) -> None:
        for path, text in self.originals.items():
            path.write_text(text)


DEVICE_EDIT = ("axpy_device.cu", "out[i] = kreg::from_float<T>(axpy_element(",
               "out[i] = kreg::from_float<T>({k}.0f + axpy_element(")
VECTOR_EDIT = ("axpy_device.cu", "r.lane[l] = kreg::from_float<T>(\n            axpy_element(",
               "r.lane[l] = kreg::from_float<T>(\n            {k}.0f + axpy_element(")
HEADER_EDIT = ("include/axpy_nvrtc/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS {k}.0f")


def nvcc_path() -> str | None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    return nvcc if Path(nvcc).exists() else None


def _edit(copy: Copy, k: int, *edits) -> None:
    copy.revert()
    for relative, old, new in edits:
        path = copy.dir / relative
        text = path.read_text()
        copy.originals.setdefault(path, copy.originals.get(path, text))
        path.write_text(text.replace(old, new.format(k=k), 1))


def cpu_steps(reps: int, work: Path) -> dict:
    from registry import _core
    from registry.device import cubin_build, nvrtc

    os.environ["REGISTRY_CACHE_DIR"] = str(work / "cache")  # the toolchain memo of nvcc -cubin
    store = _core.CacheStore(str(work / "cache"))
    results = Steps()

    def device_loop(kernel: str, prefix: str):
        copy = Copy(work / "kernels", kernel, kernel)
        manifest = _core.parse_manifest(str(copy.dir / "kernel.toml"))
        memo = _core.Memo()

        def resolve():
            a = cubin_build.ensure(store, manifest, "9.0", memo, trust_memo=False, force=False)
            memo.keys = {"device": a.key}
            return a

        t = time.perf_counter()
        first = resolve()
        results[f"{prefix}cold_cubin"] = {"s": time.perf_counter() - t, "n": 1}
        seen = {Path(first.path).read_bytes()}

        def loop(edits, offset):
            times, stale = [], 0
            for k in range(offset, offset + reps):
                _edit(copy, k, *edits)
                t = time.perf_counter()
                a = resolve()
                times.append(time.perf_counter() - t)
                data = Path(a.path).read_bytes()
                stale += data in seen
                seen.add(data)
            return {"s": median(times), "n": reps, "stale": stale}

        results[f"{prefix}device_edit"] = loop([DEVICE_EDIT, VECTOR_EDIT], 1)
        results[f"{prefix}header_edit"] = loop([HEADER_EDIT], 100)
        copy.revert()
        t = time.perf_counter()
        resolve()
        results[f"{prefix}nochange"] = {"s": time.perf_counter() - t, "n": 1}
        return copy, manifest

    copy, manifest = device_loop("axpy_nvrtc", "")
    if nvcc_path():
        device_loop("axpy_cubin", "cubin_")

    nv = nvrtc.load()
    results["floors"] = floors(nv, copy, manifest, reps, work)
    results["nvrtc"] = nv.identity()
    return results


def floors(nv, copy: Copy, manifest, reps: int, work: Path, arch: str = "sm_90") -> dict:
    """The compilers alone on the same code. Each NVRTC compile gets source
    no compile before it saw (the loop's device edit with a new constant):
    NVRTC answers an identical recompile from the CUDA compute cache (0.07 s
    against 0.28 s on the H200), which no edit ever gets."""
    from registry.builder import keys
    from registry.device import nvrtc_device

    out: dict = {}
    includes = [f"-I{d}" for d in keys.include_dirs(manifest) + [str(nvrtc_device.SHIM_DIR), nv.include_dir]]
    original = (copy.dir / "axpy_device.cu").read_text()
    fresh = iter(range(10_000, 1_000_000))

    def new_source() -> bytes:
        k = next(fresh)
        text = original
        for _, old, new in (DEVICE_EDIT, VECTOR_EDIT):
            text = text.replace(old, new.format(k=k), 1)
        return text.encode()

    variants = {"nvrtc_compile": nvrtc_device.nvrtc_options(manifest, arch, split=nv.splits_compiles),
                "nvrtc_compile_one_thread": nvrtc_device.nvrtc_options(manifest, arch, split=False)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(reps):  # in turn, so both see the same load
        for name, options in variants.items():
            source = new_source()
            t = time.perf_counter()
            cubin, log = nv.compile(source, str(copy.dir / "axpy_device.cu"), options + includes)
            times[name].append(time.perf_counter() - t)
            assert cubin is not None, log
    for name, ts in times.items():
        out[name] = {"s": median(ts), "n": reps}
    nvcc = nvcc_path()
    if nvcc:
        axpy = CHECKOUT / "kernels" / "axpy"
        inc = [f"-I{axpy}", f"-I{axpy / 'include'}", f"-I{keys.REGISTRY_INCLUDE}"]
        for what, flags in (("nvcc_cubin", ["-cubin"]), ("nvcc_c", ["-c", "--compiler-options", "-fPIC"])):
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                subprocess.run([nvcc, "-O3", f"-arch={arch}", "-std=c++17", *inc, *flags, str(axpy / "axpy.cu"),
                                "-o", str(work / "floor.out")], check=True, capture_output=True)
                times.append(time.perf_counter() - t)
            out[what] = {"s": median(times), "n": reps}
        # The nvcc-cubin path's own floor: nvcc -cubin of its device code (axpy_cubin's,
        # which is axpy_nvrtc's), no registry. The result keeps the name it has in
        # earlier runs' files.
        cubin = CHECKOUT / "kernels" / "axpy_nvrtc"
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-std=c++17", f"-I{cubin}", f"-I{cubin / 'include'}",
                            f"-I{keys.REGISTRY_INCLUDE}", str(cubin / "axpy_device.cu"), "-o", str(work / "floor.out")],
                           check=True, capture_output=True)
            times.append(time.perf_counter() - t)
        out["nvcc_cubin_axpy_cubin"] = {"s": median(times), "n": reps}
    return out


def gpu_steps(reps: int, torch_reps: int, work: Path) -> dict:
    import torch

    import registry
    from edit_loop_torch import TorchLoadBaseline

    kernels = work / "kernels"
    os.environ.update(REGISTRY_KERNELS_PATH=str(kernels), REGISTRY_CACHE_DIR=str(work / "cache"),
                      CCACHE_DIR=str(work / "ccache"))
    copy = Copy(kernels, "axpy_nvrtc", "axpy_nvrtc")
    cubin_copy = Copy(kernels, "axpy_cubin", "axpy_cubin")
    nvcc_copy = Copy(kernels, "axpy", "axpy")
    x, y = torch.ones(1 << 12, device="cuda"), torch.ones(1 << 12, device="cuda")

    def value(name):
        return registry.get(name, device="cuda")(x, y, 2.0)[0].item()

    results = Steps()
    t = time.perf_counter()
    assert value("axpy_nvrtc") == 3.0
    results["first_get"] = {"s": time.perf_counter() - t, "n": 1}  # builds the binding of the signature
    for name in ("axpy", "axpy_cubin"):
        t = time.perf_counter()
        assert value(name) == 3.0
        results[f"first_get_{name}"] = {"s": time.perf_counter() - t, "n": 1}

    def loop(target: Copy, name: str, edits, offsets, expected):
        times, stale = [], 0
        for k in offsets:
            _edit(target, k, *edits)
            t = time.perf_counter()
            got = value(name)
            times.append(time.perf_counter() - t)
            stale += got != expected(k)
        target.revert()
        value(name)
        return {"s": median(times), "n": len(times), "stale": stale}

    results["device_edit"] = loop(copy, "axpy_nvrtc", [DEVICE_EDIT, VECTOR_EDIT], range(1, reps + 1),
                                  lambda k: 3.0 + k)
    results["header_edit"] = loop(copy, "axpy_nvrtc", [HEADER_EDIT], range(100, 100 + reps), lambda k: 3.0 + k)
    launch_edit = ("axpy_launch.cpp", "return launch(\"axpy_vectorized_\"", "alpha *= {k}; return launch(\"axpy_vectorized_\"")
    results["host_edit"] = loop(copy, "axpy_nvrtc", [launch_edit], range(2, 2 + reps), lambda k: 2.0 * k + 1.0)
    results["nvcc_cubin_edit"] = loop(cubin_copy, "axpy_cubin", [DEVICE_EDIT, VECTOR_EDIT], range(1, reps + 1),
                                      lambda k: 3.0 + k)
    results["nvcc_cubin_header_edit"] = loop(cubin_copy, "axpy_cubin", [HEADER_EDIT], range(100, 100 + reps),
                                             lambda k: 3.0 + k)
    results["nvcc_edit"] = loop(nvcc_copy, "axpy", [("axpy.cu", "axpy_element(alpha,", "{k}.0f + axpy_element(alpha,")],
                                range(1, reps + 1), lambda k: 3.0 + k)
    cold = []
    for i in range(reps):
        name = f"axpy_nvrtc_cold{i}"
        shutil.copytree(copy.dir, kernels / name)
        script = ("import time, torch, registry; t = time.perf_counter(); "
                  f"op = registry.get({name!r}, device='cuda'); torch.cuda.synchronize(); "
                  "print(time.perf_counter() - t)")
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
        assert p.returncode == 0, p.stderr[-2000:]
        cold.append(float(p.stdout.strip().splitlines()[-1]))
    results["cold_get"] = {"s": median(cold), "n": reps}
    # The compilers alone on the same code, in this run: what the steps above are read against.
    from registry import _core
    from registry.device import nvrtc

    major, minor = torch.cuda.get_device_capability()
    manifest = _core.parse_manifest(str(copy.dir / "kernel.toml"))
    results["floors"] = floors(nvrtc.load(), copy, manifest, reps, work, f"sm_{major}{minor}")
    results["device"] = torch.cuda.get_device_name()
    results["status"] = str(registry.status("axpy_nvrtc", device="cuda"))
    if torch_reps > 0:  # last: the slowest part by far
        torch_load = TorchLoadBaseline(CHECKOUT, work / "torch", "cuda", torch_reps).run(edits_only=True)
        results["torch_load"] = {k: torch_load[k] for k in ("source_edit", "header_edit") if k in torch_load}
    return results


def markdown(results: dict, device: str, command: str) -> str:
    lines = [f"# NVRTC edit loop ({device})", "", f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- machine: {platform.node()} ({os.cpu_count()} cores, load average at the end "
             f"{os.getloadavg()[0]:.1f}: other work shares the cores)", f"- command: `{command}`", "",
             "| step | median s | n | stale |", "|---|---|---|---|"]

    def rows(prefix, table):
        for name, r in table.items():
            if isinstance(r, dict) and "s" in r:
                lines.append(f"| {prefix}{name} | {r['s']:.3f} | {r['n']} | {r.get('stale', '')} |")
            elif isinstance(r, dict):
                rows(f"{name}: ", r)

    rows("", results)
    for key in ("nvrtc", "device"):
        if key in results:
            lines += ["", f"{key}: {results[key]}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--reps", type=int, default=None, help="edits per step (default: 7 on cpu, 5 on cuda)")
    parser.add_argument("--torch-reps", type=int, default=2,
                        help="torch load() edits of each kind (--device cuda; each a 20-40 s build; 0 skips them)")
    parser.add_argument("--out", default=str(CHECKOUT / "bench" / "results"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nvrtc_bench_"))
    reps = args.reps or (7 if args.device == "cpu" else 5)
    results = cpu_steps(reps, work) if args.device == "cpu" else gpu_steps(reps, args.torch_reps, work)
    command = "python " + " ".join([os.path.relpath(sys.argv[0], CHECKOUT), *sys.argv[1:]])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"nvrtc_edit_loop-{args.device}.json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results, args.device, command)
    (out / f"nvrtc_edit_loop-{args.device}.md").write_text(text)
    print(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
