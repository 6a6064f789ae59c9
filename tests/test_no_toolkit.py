"""CUDA kernels iterated on a machine with torch's wheels and no CUDA toolkit:
nvcc hidden (PATH without it, CUDA_HOME pointing nowhere), an NVRTC kernel's
device code, its host launchers and its op binding still build and are keyed,
and nothing runs nvcc. No GPU here: build + key + load the libraries, no launch
(launching is tests/test_gpu_device_paths.py's part)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKOUT, KernelCopy
from registry import _core
from registry.device import nvrtc

SCRIPT = r"""
import json, shutil, sys
popen = []  # every subprocess this process starts (argv)
sys.addaudithook(lambda event, args: popen.append([str(a) for a in (args[1] or [])])
                 if event == "subprocess.Popen" else None)
assert shutil.which("nvcc") is None, shutil.which("nvcc")
import registry
from registry.device import driver_module
bound = []
driver_module.bind = lambda library, key, path: bound.append(key)  # a stand-in for the driver
registry.get(sys.argv[1], device="cuda")
status = registry.status(sys.argv[1], device="cuda")
print(json.dumps({"compiled": status.compiled, "device": status.device, "key": status.key,
                  "artifacts": status.artifacts, "bound": bound, "popen": popen}))
"""


def _hidden_toolkit_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "PYTORCH_NVCC")}
    env["CUDA_HOME"] = str(tmp_path / "no-cuda-here")  # torch and the registry would look in /usr/local/cuda
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    env["PYTHONPATH"] = str(CHECKOUT)
    env["TORCH_CUDA_ARCH_LIST"] = "9.0"
    env["REGISTRY_KERNELS_PATH"] = str(tmp_path / "kernels")
    env["REGISTRY_CACHE_DIR"] = str(tmp_path / "cache")
    env["CCACHE_DIR"] = str(tmp_path / "ccache")
    return env


def test_nvrtc_kernel_builds_with_no_cuda_toolkit(tmp_path):
    if any(Path(d, "nvcc").exists() for d in ("/usr/bin", "/bin")):
        pytest.skip("nvcc is installed in /usr/bin: it cannot be hidden from PATH here")
    nv = nvrtc.load()  # torch's nvidia-cuda-nvrtc wheel (skips nothing: the wheel is a torch dependency)
    kernel = KernelCopy(tmp_path / "kernels", "axpy_nvrtc", "axpy_nvrtc")
    done = subprocess.run([sys.executable, "-c", SCRIPT, kernel.name], env=_hidden_toolkit_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])

    # Device code, host launchers and the binding: all compiled here; the cubin
    # is bound where a GPU is visible (here the stand-in records it), and only there.
    assert sorted(result["compiled"]) == ["binding", "device", "lib"], result
    import torch

    assert len(result["bound"]) == (1 if torch.cuda.is_available() else 0), result
    assert not [argv for argv in result["popen"] if any("nvcc" in a for a in argv)], result["popen"]
    store = _core.CacheStore(str(tmp_path / "cache"))
    for folder in (tmp_path / "cache").rglob("build.ninja"):
        assert "nvcc" not in folder.read_text(), folder

    # Which NVRTC: in status() and in the cubin's key.
    assert result["device"].startswith(nv.identity()), result["device"]
    cubin_key = result["device"].rsplit("cubin key ", 1)[1]
    cubin_inputs = {i.name: i.value for i in store.lookup(cubin_key).entry.inputs}
    assert cubin_inputs["toolchain.nvrtc"] == nv.identity()
    # No toolkit in any key: the launchers' and the binding's.
    binding_key = Path(result["artifacts"]["binding axpy"]).parent.name
    for key in (result["key"], binding_key):
        names = {i.name for i in store.lookup(key).entry.inputs}
        assert "toolchain.nvcc" not in names, (key, names)
