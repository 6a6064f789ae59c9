"""The edit loop of kernels/gemm_nvrtc (kernels/gemm's Hopper GEMM, device
code through NVRTC with a precompiled prelude), beside `nvcc -cubin` of the
same device code, measured in the same run.

    python bench/gemm_edit_loop.py --device cpu  [--edits 3] [--out bench/results]
    python bench/gemm_edit_loop.py --device cuda [--edits 5] [--out bench/results]
    ... --speed           (cuda) then the op's speed beside torch.matmul
    ... --steps epilogue  only these of body,epilogue,restart,nvcc (a short GPU run)
    ... --define GEMM_TMA_EPILOGUE=1
                          the copy built with a macro of types.cuh set (device
                          code and launcher alike; repeatable): here CUTLASS's
                          fused TMA epilogue (kernels/gemm's) in place of the
                          register epilogue; runs side by side compare what
                          each costs an edit and in speed
    ... --learned-kernels the copy without [cuda] kernels_used: the first link of
                          each main unit (the cold build, every body edit) holds
                          both kernels and learns their names; results go to
                          *_learned-<device>.*
    ... --one-unit        the epilogue compiled into the kernels' unit (included
                          by gemm_device.cu) instead of linked by nvJitLink -lto
                          as kernels/gemm_nvrtc ships it ([cuda] link_sources,
                          device/lto_link.py): results go to
                          gemm_edit_loop-<device>.*, else gemm_edit_loop_linked-<device>.*

On a copy of kernels/gemm_nvrtc (a fresh cache under a temporary folder):
  cold            the first build: the compile server starts and makes the PCH
  body_edit       N edits of gemm_device.cu (the kernels' entry: a different
                  but equivalent spelling each time)
  epilogue_edit   N edits of gemm_epilogue.cu (alpha-free scale of the result:
                  value * s with s a power of two, so the check is exact;
                  each edit a scale of its own, so none is a cache hit)
  revert          the original files again: answered from the cache
  restart_epilogue_edit
                  a new process (the notebook restarted: no compile server,
                  nothing kept in memory) edits the epilogue once, timed
                  after torch, the registry and (cuda) the device's context,
                  which a notebook has before its first edit
  speed           (cuda, --speed) the op beside torch.matmul at bench/gemm.py's
                  shapes, timed as there: does linking cost speed
  nvcc_cubin      `nvcc -cubin` of the edited device unit (prelude + body +
                  epilogue, the registry's options): what an edit costs without
                  the prelude's PCH
Each edit is timed from the write to (cpu) a new cached cubin, the device
half of `get`, or (cuda) a checked result of registry.get(...)'s op. Each
compile's phases are NVRTC's own (--time): front end, NVVM, PTX translation
(ptxas); the floor is NVVM + PTX translation of the edited kernel, what is
left once the front end is gone, and the table gives each step's time over
it. Writes gemm_edit_loop-<device>.json and .md.
"""
from __future__ import annotations

import argparse
import datetime
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

KERNEL = "gemm_nvrtc"
ALL_STEPS = ("body", "epilogue", "restart", "nvcc")  # --steps: what runs beside cold and revert
EPILOGUE = "__device__ float gemm_nvrtc::epilogue(float value) { return value; }"
ENTRY = "  op(params, smem);"


def body_edit(i: int) -> tuple[str, str]:
    # The same kernel, a different source: a statement the compiler drops.
    return ENTRY, f"{ENTRY}\n  (void)({i + 1});"


def epilogue_edit(i: int) -> tuple[str, str, float]:
    """The i-th edit multiplies by 2^(i + 1): -1 (the restarted process's) by 1."""
    scale = 2.0 ** (i + 1)
    return EPILOGUE, EPILOGUE.replace("return value;", f"return value * {scale}f;"), scale


class Loop:
    """The copied kernel and how one step is timed: the device half of get
    (cpu) or get and a checked call (cuda)."""

    def __init__(self, root: Path, device: str, one_unit: bool = False, attach: bool = False,
                 defines: tuple[str, ...] = (), learned: bool = False):
        """attach: use the copy an earlier process made under root."""
        self.root, self.device, self.linked = root, device, not one_unit
        self.dir = root / "kernels" / KERNEL
        self.epilogue = "gemm_epilogue.cuh" if one_unit else "gemm_epilogue.cu"
        if not attach:
            shutil.copytree(CHECKOUT / "kernels" / KERNEL, self.dir)
            if one_unit:
                self._one_unit()
            # The launcher's types must match the device code's: both get the macros.
            for flags in ('device_cflags = ["-DNDEBUG"', 'cflags = ["-O2", "-DNDEBUG"'):
                self.write("kernel.toml", flags, flags + "".join(f', "-D{d}"' for d in defines))
            if learned and not one_unit:
                self.write("kernel.toml", 'kernels_used = ["gemm_nvrtc_bf16", "gemm_nvrtc_f16"]\n', "")
        os.environ["REGISTRY_CACHE_DIR"] = str(root / "cache")
        os.environ["REGISTRY_KERNELS_PATH"] = str(root / "kernels")
        from registry import _core

        self.store = _core.CacheStore(str(root / "cache"))
        self.previous = None
        self.checks = 0

    def _one_unit(self) -> None:
        """The copy with its epilogue a header the kernels' unit includes
        (gemm_epilogue.cuh), not a link source: every edit compiles the
        kernels' whole unit after the prelude's precompiled header."""
        (self.dir / "gemm_epilogue.cu").unlink()
        (self.dir / self.epilogue).write_text('#pragma once\n#include "gemm_nvrtc/types.cuh"\n' + EPILOGUE + "\n")
        self.write("gemm_device.cu", '#include "gemm_nvrtc/types.cuh"\n',
                   '#include "gemm_epilogue.cuh"\n#include "gemm_nvrtc/types.cuh"\n')
        self.write("kernel.toml", 'link_sources = ["gemm_epilogue.cu"]\n', "")
        self.write("kernel.toml", 'kernels_used = ["gemm_nvrtc_bf16", "gemm_nvrtc_f16"]\n', "")  # link_sources' only

    def write(self, name: str, old: str, new: str) -> None:
        path = self.dir / name
        text = path.read_text()
        assert old in text, (old, path)
        path.write_text(text.replace(old, new, 1))

    def step(self, scale: float = 1.0) -> dict:
        from registry.device import lto_link, nvrtc_pch

        start, linked_start = len(nvrtc_pch.pch_events), len(lto_link.main_unit_events)
        links_start = len(lto_link.link_events)
        t0 = time.perf_counter()
        if self.device == "cpu":
            built = self._device_half()
        else:
            built = self._checked(scale)
        seconds = time.perf_counter() - t0
        server = next(iter(nvrtc_pch._servers.values()), None)
        events = nvrtc_pch.pch_events[start:]
        last = dict(server.last_reply) if server is not None and events else {}
        linked = lto_link.main_unit_events[linked_start:]
        if linked:  # the main unit compiled ("compiled") or kept, then the link: its phases are the build's
            pch = events + [f"main unit {e}" for e in linked] + lto_link.link_events[links_start:]
            return dict(seconds=seconds, pch=pch, compiled=built, phases_s=dict(lto_link.last_phases),
                        compile_s=None, compile_cpu_s=None)
        return dict(seconds=seconds, pch=events, compiled=built, phases_s=last.get("phases", {}),
                    compile_s=last.get("seconds"), compile_cpu_s=last.get("cpu_seconds"))

    def _device_half(self) -> bool:
        from registry import _core
        from registry.device import cubin_build

        manifest = _core.parse_manifest(str(self.dir / "kernel.toml"))
        memo = None
        if self.previous is not None:
            memo = _core.Memo()
            memo.keys = {"device": self.previous.key}
        artifact = cubin_build.ensure(self.store, manifest, "9.0a", memo,
                                      trust_memo=False, force=False)
        self.previous = artifact
        return artifact.built is not None

    def _checked(self, scale: float) -> bool:
        import torch

        import registry
        from registry.device import cubin_build

        before = len(cubin_build.compiles_run)
        op = registry.get(KERNEL, device="cuda")
        # New inputs for every check, and the output's block poisoned: the
        # caching allocator hands the last call's freed output back, so a
        # kernel that wrote nothing would otherwise show the last result.
        self.checks += 1
        gen = torch.Generator().manual_seed(self.checks)
        a, b, bias = [torch.randn(*s, generator=gen).to("cuda", torch.bfloat16)
                      for s in ((1024, 512), (512, 768), (768,))]
        poison = torch.full((1024, 768), float("nan"), device="cuda", dtype=torch.bfloat16)
        del poison
        got = op(a, b, bias=bias).float()  # one op: the handle is the op itself
        want = scale * (a.float() @ b.float() + bias.float())
        err = ((got - want).norm() / want.norm()).item()
        assert err < 1e-2, f"the edited gemm is wrong: relative error {err}"
        return len(cubin_build.compiles_run) > before


def nvcc_cubin(loop: Loop) -> dict:
    """`nvcc -cubin` of the same device unit as the registry compiles it (nvcc_cubin.py's options)."""
    import cutlass_library

    from registry import environment

    cut = Path(cutlass_library.__file__).parent / "source" / "include"
    work = Path(tempfile.mkdtemp(prefix="gemm-nvcc-"))
    unit = work / "unit.cu"
    epilogue = f'#include "{loop.dir}/{loop.epilogue}"\n' if loop.linked else ""  # else gemm_device.cu includes it
    unit.write_text(f'#include "{loop.dir}/gemm_prelude.cuh"\n#include "{loop.dir}/gemm_device.cu"\n{epilogue}')
    arch = "sm_90a"  # the kernel is Hopper's only
    table = work / "time.csv"
    command = [environment.nvcc_command(), "-cubin", f"-arch={arch}", "-std=c++17", "-DNDEBUG",
               "--expt-relaxed-constexpr", "--time", str(table), f"-I{loop.dir}", f"-I{loop.dir}/include",
               f"-I{CHECKOUT}/registry/include", f"-I{cut}", str(unit), "-o", str(work / "unit.cubin")]
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=work)
    seconds = time.perf_counter() - t0
    phases: dict[str, float] = {}
    if table.is_file():
        for row in table.read_text().splitlines()[1:]:
            cells = [c.strip() for c in row.split(",")]
            if len(cells) >= 4 and cells[-1] == "ms":
                phases[cells[1]] = phases.get(cells[1], 0.0) + float(cells[-2]) / 1e3
    shutil.rmtree(work, ignore_errors=True)
    return dict(seconds=seconds, ok=done.returncode == 0, phases_s=phases, error=done.stderr[-2000:] or None)


def floor_of(step: dict) -> float | None:
    phases = step.get("phases_s") or {}
    parts = [v for k, v in phases.items() if k.startswith(("NVVM", "PTX"))]
    return sum(parts) if parts else None


def speeds(loop: Loop) -> list[dict]:
    """bench/gemm.py's rows for the op as the loop left it (the original files, cached)."""
    import registry
    from gemm import speed

    return speed(registry.get(KERNEL, device="cuda"), compile_too=False)


def run(device: str, edits: int, one_unit: bool = False, speed: bool = False, only=ALL_STEPS,
        defines: tuple[str, ...] = (), learned: bool = False) -> dict:
    root = Path(tempfile.mkdtemp(prefix="gemm-edit-loop-"))
    loop = Loop(root, device, one_unit, defines=defines, learned=learned)
    # The edits' targets exist before the first (minutes long) build.
    assert ENTRY in (loop.dir / "gemm_device.cu").read_text() and EPILOGUE in (loop.dir / loop.epilogue).read_text()
    steps: dict[str, list[dict]] = {"cold": [], "body_edit": [], "epilogue_edit": [], "revert": [],
                                    "restart_epilogue_edit": []}

    def record(name: str, result: dict) -> None:
        result["floor_s"] = floor_of(result)
        steps[name].append(result)
        print(name, json.dumps(result), flush=True)

    try:
        done = dict(steps=steps, **loop_steps(loop, edits, record, only))
        if speed and device == "cuda":
            done["speed"] = speeds(loop)
        return done
    finally:  # a run cut short leaves no server and no 3 GB precompiled header behind
        from registry.device import nvrtc_pch

        for server in nvrtc_pch._servers.values():
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def loop_steps(loop: Loop, edits: int, record, only=ALL_STEPS) -> dict:
    record("cold", loop.step())
    originals = {n: (loop.dir / n).read_text() for n in ("gemm_device.cu", loop.epilogue)}
    for i in range(edits if "body" in only else 0):
        old, new = body_edit(i)
        loop.write("gemm_device.cu", old, new)
        record("body_edit", loop.step())
        (loop.dir / "gemm_device.cu").write_text(originals["gemm_device.cu"])
    for i in range(edits if "epilogue" in only else 0):
        old, new, scale = epilogue_edit(i)
        loop.write(loop.epilogue, old, new)
        record("epilogue_edit", loop.step(scale))
        (loop.dir / loop.epilogue).write_text(originals[loop.epilogue])
    for name, text in originals.items():
        (loop.dir / name).write_text(text)
    record("revert", loop.step())
    if "restart" in only:
        record("restart_epilogue_edit", restart_epilogue_edit(loop))
    for name, text in originals.items():
        (loop.dir / name).write_text(text)
    if "nvcc" not in only:
        return dict(nvcc_cubin=None)
    nvcc = nvcc_cubin(loop)
    print("nvcc_cubin", json.dumps(nvcc), flush=True)
    return dict(nvcc_cubin=nvcc)


def restart_epilogue_edit(loop: Loop) -> dict:
    """One epilogue edit timed in a new process on the same copy and cache."""
    command = [sys.executable, __file__, "--device", loop.device, "--restarted", str(loop.root)]
    done = subprocess.run(command + ([] if loop.linked else ["--one-unit"]), capture_output=True, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the restarted process failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def restarted(root: Path, device: str, one_unit: bool) -> None:
    """The new process's side: edit the epilogue (the copy's last revert undone), time it, print it.
    What a restarted notebook has done before its first edit is done before
    the clock starts: torch and the registry imported and, on cuda, the
    device's context made (its first tensor). What the edit then pays is the
    registry's own: the compilers opened, the main unit read from the cache,
    the link, the launcher and its module loaded."""
    if device == "cuda":
        import torch

        import registry  # noqa: F401

        torch.ones(1, device="cuda").sum().item()
    loop = Loop(root, device, one_unit, attach=True)
    old, new, scale = epilogue_edit(-1)
    loop.write(loop.epilogue, old, new)
    try:
        print(json.dumps(loop.step(scale)), flush=True)
    finally:
        from registry.device import nvrtc_pch

        for server in nvrtc_pch._servers.values():
            server.stop()


def report(result: dict, device: str, command: str) -> str:
    def med(xs):
        xs = [x for x in xs if x is not None]
        return f"{statistics.median(xs):.2f}" if xs else "-"

    title = "kernels/gemm_nvrtc's edit loop" + (", its epilogue linked (link_sources)" if result["linked"]
                                                else ", its epilogue compiled into the kernels' unit")
    if result.get("defines"):
        title += ", built with " + " ".join(result["defines"])
    lines = [f"# {title} ({device})", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
             f"{os.cpu_count()} cores, `{command}`", "", f"{result['compilers']}.", "",
             "| step | n | seconds (median) | compile s | compile CPU s | front end s | NVVM s | PTX s "
             "| floor (NVVM + PTX) s | seconds / floor | PCH |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, steps in result["steps"].items():
        def phase(prefix):
            return med([sum(v for k, v in s["phases_s"].items() if k.startswith(prefix)) or None for s in steps])

        lines.append(f"| {name} | {len(steps)} | {med([s['seconds'] for s in steps])} | "
                     f"{med([s['compile_s'] for s in steps])} | {med([s['compile_cpu_s'] for s in steps])} | "
                     f"{phase('CUDA C++')} | {phase('NVVM')} | "
                     f"{phase('PTX')} | {med([s['floor_s'] for s in steps])} | "
                     f"{med([s['seconds'] / s['floor_s'] if s['floor_s'] else None for s in steps])} | "
                     f"{', '.join(sorted({e for s in steps for e in s['pch']})) or 'cache'} |")
    nvcc = result["nvcc_cubin"]
    if nvcc is not None:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in nvcc["phases_s"].items())
        lines += ["", f"nvcc -cubin of the same device unit, same run: {nvcc['seconds']:.2f} s "
                      f"({'ok' if nvcc['ok'] else 'failed'}; phases: {phases or '-'})."]
    if result.get("speed"):
        lines += ["", "| shape | op TFLOP/s | cuBLAS TFLOP/s | op / cuBLAS | rel err |", "|---|---|---|---|---|"]
        lines += [f"| {r['shape']} | {r['registry_tflops']:.0f} | {r['cublas_tflops']:.0f} | {r['ratio']:.3f} | "
                  f"{r['rel_err']:.1e} |" for r in result["speed"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results")
    parser.add_argument("--one-unit", action="store_true",
                        help="the epilogue compiled into the kernels' unit, not linked by nvJitLink -lto")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="build the copy with this macro of types.cuh (e.g. GEMM_TMA_EPILOGUE=1)")
    parser.add_argument("--speed", action="store_true", help="cuda: the op beside torch.matmul after the loop")
    parser.add_argument("--learned-kernels", action="store_true",
                        help="the copy without [cuda] kernels_used: a main unit's first link holds both kernels")
    parser.add_argument("--steps", default=",".join(ALL_STEPS),
                        help=f"which of {','.join(ALL_STEPS)} to run beside cold and revert (default: all)")
    parser.add_argument("--restarted", type=Path, help=argparse.SUPPRESS)  # restart_epilogue_edit's process
    args = parser.parse_args()
    if args.restarted:
        return restarted(args.restarted, args.device, args.one_unit)
    from gemm_lto_link import compilers  # this folder

    result = dict(run(args.device, args.edits, args.one_unit, args.speed, tuple(args.steps.split(",")),
                      tuple(args.define), args.learned_kernels),
                  linked=not args.one_unit, defines=args.define, learned_kernels=args.learned_kernels,
                  compilers=compilers())
    command = "python " + " ".join([os.path.relpath(sys.argv[0], CHECKOUT), *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    variant = ("" if args.one_unit else "_linked") + "".join(f"_{d.replace('=', '')}" for d in args.define)
    variant += "_learned" if args.learned_kernels else ""
    stem = f"gemm_edit_loop{variant}-{args.device}"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    text = report(result, args.device, command)
    (args.out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
