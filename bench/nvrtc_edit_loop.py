"""The edit loop of device code through NVRTC (kernels/axpy_nvrtc), beside the
nvcc path and torch's load() measured in the same run.

    python bench/nvrtc_edit_loop.py --device cpu  [--reps 7] [--out bench/results]
    python bench/nvrtc_edit_loop.py --device cuda [--reps 7] [--out bench/results]

--device cpu (no GPU needed): each step is timed from the edit to a new,
cached cubin (the device half of `get`: scan, snapshot, key, NVRTC, publish):
  device_edit     edit axpy_device.cu
  header_edit     edit include/axpy_nvrtc/config.h (stale = a cubin seen before)
  floors          NVRTC alone on the same unit; `nvcc -cubin` and `nvcc -c` of
                  kernels/axpy/axpy.cu when nvcc is installed
--device cuda: each step is timed from the edit to a checked result of the op:
  device_edit, header_edit (stale = an old value), host_edit (axpy_launch.cpp),
  nvcc_edit (kernels/axpy's .cu through the nvcc path), cold_get (a renamed
  copy of axpy_nvrtc in a fresh process: its signature was built before), and
  torch load()'s source and header edits of kernels/axpy (bench/edit_loop_torch.py).
Writes nvrtc_edit_loop-<device>.json and .md with medians.
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


def median(xs):
    return statistics.median(xs) if xs else None


class Copy:
    def __init__(self, root: Path, source: str, name: str):
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


def _edit(copy: Copy, k: int, *edits) -> None:
    copy.revert()
    for relative, old, new in edits:
        path = copy.dir / relative
        text = path.read_text()
        copy.originals.setdefault(path, copy.originals.get(path, text))
        path.write_text(text.replace(old, new.format(k=k), 1))


def cpu_steps(reps: int, work: Path) -> dict:
    from registry import _core, device_build, nvrtc

    copy = Copy(work / "kernels", "axpy_nvrtc", "axpy_nvrtc")
    store = _core.CacheStore(str(work / "cache"))
    manifest = _core.parse_manifest(str(copy.dir / "kernel.toml"))
    memo = _core.Memo()

    def resolve():
        a = device_build.ensure(store, manifest, "9.0", memo, trust_memo=False, force=False)
        memo.keys = {"device": a.key}
        return a

    t = time.perf_counter()
    first = resolve()
    results = {"cold_cubin": {"s": time.perf_counter() - t, "n": 1}}
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

    results["device_edit"] = loop([DEVICE_EDIT, VECTOR_EDIT], 1)
    results["header_edit"] = loop([HEADER_EDIT], 100)
    copy.revert()
    t = time.perf_counter()
    resolve()
    results["nochange"] = {"s": time.perf_counter() - t, "n": 1}

    nv = nvrtc.load()
    results["floors"] = floors(nv, copy, manifest, reps, work)
    results["nvrtc"] = nv.identity()
    return results


def floors(nv, copy: Copy, manifest, reps: int, work: Path) -> dict:
    from registry import device_build, keys

    out: dict = {}
    options = device_build.nvrtc_options(manifest, "sm_90") + [
        f"-I{d}" for d in keys.include_dirs(manifest) + [str(device_build.SHIM_DIR), nv.include_dir]]
    source = (copy.dir / "axpy_device.cu").read_bytes()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        cubin, log = nv.compile(source, str(copy.dir / "axpy_device.cu"), options)
        times.append(time.perf_counter() - t)
        assert cubin is not None, log
    out["nvrtc_compile"] = {"s": median(times), "n": reps}
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc:
        axpy = CHECKOUT / "kernels" / "axpy"
        inc = [f"-I{axpy}", f"-I{axpy / 'include'}", f"-I{keys.REGISTRY_INCLUDE}"]
        for what, flags in (("nvcc_cubin", ["-cubin"]), ("nvcc_c", ["-c", "--compiler-options", "-fPIC"])):
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                subprocess.run([nvcc, "-O3", "-arch=sm_90", "-std=c++17", *inc, *flags, str(axpy / "axpy.cu"),
                                "-o", str(work / "floor.out")], check=True, capture_output=True)
                times.append(time.perf_counter() - t)
            out[what] = {"s": median(times), "n": reps}
    return out


def gpu_steps(reps: int, work: Path) -> dict:
    import torch

    import registry
    from edit_loop_torch import TorchLoadBaseline

    kernels = work / "kernels"
    os.environ.update(REGISTRY_KERNELS_PATH=str(kernels), REGISTRY_CACHE_DIR=str(work / "cache"),
                      CCACHE_DIR=str(work / "ccache"))
    copy = Copy(kernels, "axpy_nvrtc", "axpy_nvrtc")
    nvcc_copy = Copy(kernels, "axpy", "axpy")
    x, y = torch.ones(1 << 12, device="cuda"), torch.ones(1 << 12, device="cuda")

    def value(name):
        return registry.get(name, device="cuda")(x, y, 2.0)[0].item()

    results: dict = {}
    t = time.perf_counter()
    assert value("axpy_nvrtc") == 3.0
    results["first_get"] = {"s": time.perf_counter() - t, "n": 1}
    value("axpy")

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
    torch_load = TorchLoadBaseline(CHECKOUT, work / "torch", "cuda", reps).run()
    results["torch_load"] = {k: torch_load[k] for k in ("source_edit", "header_edit") if k in torch_load}
    results["device"] = torch.cuda.get_device_name()
    results["status"] = str(registry.status("axpy_nvrtc", device="cuda"))
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
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--out", default=str(CHECKOUT / "bench" / "results"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nvrtc_bench_"))
    results = cpu_steps(args.reps, work) if args.device == "cpu" else gpu_steps(args.reps, work)
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
