"""What a build depends on besides files: compilers, versions, target arch.

Each value becomes an `env.*` or `toolchain.*` key input, so upgrading torch,
switching compilers, or moving to another GPU generation changes the key and
`status()` names which one did.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from registry import _core, ccache


# Asking torch about the GPU starts the CUDA driver (hundreds of ms), which a
# `get` that finds everything cached should not pay. The driver's /proc files
# name the GPU models without starting anything; the capability of a set of
# models is asked once and remembered in <cache>/v1/cuda_arch.txt.
_PROC_GPUS = Path("/proc/driver/nvidia/gpus")


def _gpu_models() -> list[str] | None:
    """GPU model names from the driver, or None when /proc does not tell."""
    try:
        models = []
        for info in sorted(_PROC_GPUS.glob("*/information")):
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    models.append(line.split(":", 1)[1].strip())
        return models
    except OSError:
        return None


def cuda_available() -> bool:
    import torch

    if torch.version.cuda is None:
        return False
    if torch.cuda.is_initialized() or os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return torch.cuda.is_available()
    models = _gpu_models()
    return bool(models) if models is not None else torch.cuda.is_available()


def cuda_arch_list(cache_root: Path) -> str:
    """The architectures a CUDA build targets: TORCH_CUDA_ARCH_LIST if set,
    else exactly the current device's compute capability (e.g. "9.0")."""
    configured = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if configured:
        return configured
    import torch

    models = None if torch.cuda.is_initialized() else _gpu_models()
    if not models or len(set(models)) != 1 or os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    memo = cache_root / "v1" / "cuda_arch.txt"
    known = dict(line.split("\t", 1) for line in _read_lines(memo) if "\t" in line)
    if models[0] not in known:
        major, minor = torch.cuda.get_device_capability()
        known[models[0]] = f"{major}.{minor}"
        _core.write_file_atomic(str(memo), "".join(f"{m}\t{a}\n" for m, a in sorted(known.items())))
    return known[models[0]]


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def _ask_version(invoked: str) -> str:
    done = subprocess.run([invoked, "--version"], capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"'{invoked} --version' failed: {(done.stderr or done.stdout).strip()[:200]}")
    return done.stdout + done.stderr


def build_environment(backend: str, cache_root: Path) -> dict[str, str]:
    """Key inputs describing the toolchain and versions for `backend`."""
    import torch

    memo = str(cache_root / "v1" / "toolchains.toml")
    env = {
        "env.torch": torch.__version__,
        "env.torch_cxx11_abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
        "env.python": f"{sys.version_info.major}.{sys.version_info.minor} {sysconfig.get_config_var('SOABI')}",
        "env.platform": sys.platform,
        "toolchain.cxx": _core.identify_compiler(ccache.cxx_command(), memo, _ask_version).text(),
    }
    if backend == "cuda":
        env["env.cuda"] = str(torch.version.cuda)
        env["env.cuda_arch"] = cuda_arch_list(cache_root)
        env["toolchain.nvcc"] = _core.identify_compiler(ccache.nvcc_command(), memo, _ask_version).text()
        if os.environ.get("PYTORCH_NVCC"):
            env["toolchain.pytorch_nvcc"] = os.environ["PYTORCH_NVCC"]
        if os.environ.get("CC"):
            env["toolchain.nvcc_host_cc"] = os.environ["CC"]
    return env


def fingerprint(env: dict[str, str]) -> str:
    return _core.hash_fields_hex(sorted(env.items()))
