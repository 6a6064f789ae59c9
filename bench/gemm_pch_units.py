"""Would kernels/gemm_nvrtc's edit get faster with one unit per dtype? Each
unit with its own prelude (only its dtype's kernel instantiated) and its own
compile server, so the two could compile side by side. This compiles the
kernels' unit through the registry's compile server (device/pch_server.py)
with a precompiled prelude, three edits each: both dtypes in one unit (what
an edit compiles today), the bf16 kernel alone, and the bf16 and f16 units
side by side (one server each). NVRTC's own phases (--time) say where each
edit's time went.

    python bench/gemm_pch_units.py [--work DIR] [--units both bf16 bf16,f16]

No GPU is needed. Prints one JSON line per compile; a group's units compile
side by side ("wall_all"). The precompiled headers take ~3 GB each under DIR.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT))
sys.path.insert(0, str(CHECKOUT / "bench"))

import gemm_lto_link  # noqa: E402  (the registry's NVRTC options for kernels/gemm_nvrtc)

from registry.device import nvrtc as nvrtc_lib  # noqa: E402
from registry.device import pch_server  # noqa: E402

KERNEL_DIR = gemm_lto_link.KERNEL_DIR
KERNELS = {"both": ["Bf16", "F16"], "bf16": ["Bf16"], "f16": ["F16"]}


def unit(work: Path, which: str, edit: int) -> str:
    """The prelude (instantiating `which`'s kernels) and gemm_device.cu's
    entry points of those kernels; `edit` changes a comment only."""
    device = (KERNEL_DIR / "gemm_device.cu").read_text()
    head, rest = device.split("using gemm_nvrtc::KernelBf16;")
    entries = dict(zip(("Bf16", "F16"), ('extern "C"' + e for e in rest.split('extern "C"')[1:])))
    prelude = ('#pragma once\n#include "gemm_nvrtc/nvrtc_std.cuh"\n#include "gemm_nvrtc/types.cuh"\n' + "".join(
        f"template void gemm_nvrtc::Kernel{k}::operator()(gemm_nvrtc::Kernel{k}::Params const&, char*);\n"
        for k in KERNELS[which]))
    (work / f"prelude_{which}.cuh").write_text(prelude)
    body = (head + "using gemm_nvrtc::KernelBf16;\nusing gemm_nvrtc::KernelF16;\n"
            + "".join(entries[k] for k in KERNELS[which]) + f'#include "{KERNEL_DIR}/gemm_epilogue.cu"\n'
            + f"\n// edit {edit}\n")
    return f'#include "{work}/prelude_{which}.cuh"\nnamespace kreg_prelude_end {{}}\n' + body


class Server:
    def __init__(self, work: Path, options: list[str]):
        self.work, self.options = work, options
        self.process = subprocess.Popen(
            [sys.executable, "-E", "-s", "-S", pch_server.__file__, nvrtc_lib.load().library, "900"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def compile(self, which: str, edit: int) -> dict:
        request = dict(unit=unit(self.work, which, edit).encode(), name=f"u_{which}.cu", options=self.options,
                       prelude_key=which, pch_path=str(self.work / f"pch_{which}.pch"),
                       time_path=str(self.work / f"t_{which}_{edit}.csv"))
        t0 = time.perf_counter()
        pch_server.write_message(self.process.stdin, request)
        reply = pch_server.read_message(self.process.stdout)
        reply["wall"] = time.perf_counter() - t0
        reply.pop("cubin", None)
        return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--units", nargs="+", default=["both", "bf16", "bf16,f16"])
    parser.add_argument("--edits", type=int, default=3, help="compiles per group, the first making the PCH")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="gemm-pch-units-"))
    work.mkdir(parents=True, exist_ok=True)
    options = gemm_lto_link.options()
    try:
        for group in (g.split(",") for g in args.units):
            servers = {which: Server(work, options) for which in group}
            for edit in range(args.edits):
                replies = {}
                threads = [threading.Thread(target=lambda w=w: replies.update({w: servers[w].compile(w, edit)}))
                           for w in group]
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.perf_counter() - t0
                for which, r in replies.items():
                    print(json.dumps(dict(group=group, edit=edit, which=which, wall_all=round(wall, 2),
                                          wall=round(r["wall"], 2), pch=r.get("pch"), error=r.get("error"),
                                          phases={k: round(v, 2) for k, v in (r.get("phases") or {}).items()})),
                          flush=True)
            for server in servers.values():
                server.process.stdin.close()
                server.process.wait()
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
