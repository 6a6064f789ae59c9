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


def cuda_arch_list() -> str:
    """The architectures a CUDA build targets: TORCH_CUDA_ARCH_LIST if set,
    else exactly the current device's compute capability (e.g. "9.0")."""
    configured = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if configured:
        return configured
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


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
        env["env.cuda_arch"] = cuda_arch_list()
        env["toolchain.nvcc"] = _core.identify_compiler(ccache.nvcc_command(), memo, _ask_version).text()
        if os.environ.get("PYTORCH_NVCC"):
            env["toolchain.pytorch_nvcc"] = os.environ["PYTORCH_NVCC"]
        if os.environ.get("CC"):
            env["toolchain.nvcc_host_cc"] = os.environ["CC"]
    return env


def fingerprint(env: dict[str, str]) -> str:
    return _core.hash_fields_hex(sorted(env.items()))
