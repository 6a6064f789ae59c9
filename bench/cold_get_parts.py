"""A fresh process's `get` of a renamed kernel whose signature was built
before (bench/nvrtc_edit_loop.py's cold_get), split into its parts: which
artifacts are compiled, the environment, the plan, the cubin, the host
library's build (and its compiler processes, summed over threads), loading.

    python bench/cold_get_parts.py --device cpu  [--kernel axpy_nvrtc] [--reps 5]
    python bench/cold_get_parts.py --device cuda [--kernel axpy_nvrtc] [--reps 5]

Without a GPU, --device cuda compiles everything for TORCH_CUDA_ARCH_LIST
(default 9.0) and binds the cubin to nothing (no driver to load it into).
Parts overlap (the cubin compiles beside the host library), so they do not sum
to `get`. Prints one JSON line per process; the first builds the binding.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
parser = argparse.ArgumentParser()
parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
parser.add_argument("--kernel", default="axpy_nvrtc")
parser.add_argument("--reps", type=int, default=5)
args = parser.parse_args()
device, source, reps = args.device, args.kernel, args.reps
work = Path(tempfile.mkdtemp(prefix="coldget_"))
env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "REGISTRY_KERNELS_PATH": str(work / "kernels"),
       "REGISTRY_CACHE_DIR": str(work / "cache"), "CCACHE_DIR": str(work / "ccache")}
env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
CHILD = r'''
import sys, time, json
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import registry
from registry import _core, environment, load
from registry.builder import misses, direct
from registry.device import driver_module, cubin_build
if not torch.cuda.is_available():
    driver_module.bind = lambda library, key, path: None  # no GPU: no driver to load the cubin into
parts = {}
def timed(mod, name, label):
    fn = getattr(mod, name)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            parts[label] = parts.get(label, 0) + time.perf_counter() - t
    setattr(mod, name, wrapper)
timed(environment, "build_environment", "environment")
timed(_core, "make_plan", "plan")
timed(cubin_build, "ensure", "device (cubin)")
timed(load, "load", "load+swap")
timed(misses, "build_missing", "build host lib")
timed(direct, "_run", "compiler processes")
t2 = time.perf_counter()
op = registry.get(sys.argv[1], device=sys.argv[2])
if torch.cuda.is_available():
    torch.cuda.synchronize()
t3 = time.perf_counter()
st = registry.status(sys.argv[1], device=sys.argv[2])
print(json.dumps({"import torch": round(t1 - t0, 3), "import registry": round(t2 - t1, 3),
                  "get": round(t3 - t2, 3), "compiled": st.compiled, **{k: round(v, 3) for k, v in parts.items()}}))
'''
def child(name):
    p = subprocess.run([sys.executable, "-c", CHILD, name, device], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
shutil.copytree(CHECKOUT / "kernels" / source, work / "kernels" / source)
print("first (builds the binding):", child(source), flush=True)
for i in range(reps):
    name = f"{source}_cold{i}"
    shutil.copytree(CHECKOUT / "kernels" / source, work / "kernels" / name)
    print(name, child(name), flush=True)
shutil.rmtree(work, ignore_errors=True)
