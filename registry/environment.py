"""What this machine offers: whether a GPU is visible, so which backend a
request runs on (the one rule, `backend_for` and `for_manifest`), and what a
build depends on besides files (compilers, versions, target arch).

Each build fact becomes an `env.*` or `toolchain.*` key input, so upgrading
torch, switching compilers, or moving to another GPU generation changes the
key and `status()` names which one did.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from registry import _core, knobs


# Asking torch about the GPU starts the CUDA driver (hundreds of ms), which a
# `get` that finds everything cached should not pay. So the answer (is there a
# GPU, which compute capability) is asked once per machine identity and kept
# in the cache (knobs.cache_path("cuda_arch")). The identity is cheap to read
# and changes with anything that could change the answer: the host, the boot
# (hardware is only swapped across one), CUDA_VISIBLE_DEVICES, and the GPU
# models the driver lists in /proc where it does.
_PROC_GPUS = Path("/proc/driver/nvidia/gpus")


def _machine_identity() -> str:
    parts = [socket.gethostname(), os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    except OSError:
        pass
    try:
        for info in sorted(_PROC_GPUS.glob("*/information")):
            parts += [line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if line.startswith("Model:")]
    except OSError:
        pass
    return "|".join(parts)


def _device_answer(cache_root: Path) -> str:
    """"none", or the first visible device's capability as "major.minor"."""
    import torch

    if torch.version.cuda is None:
        return "none"
    if torch.cuda.is_initialized():
        return _ask_torch(torch)
    memo = knobs.cache_path("cuda_arch", cache_root)
    identity = _machine_identity()
    # A line that is not "identity<TAB>none|major.minor" is ignored, and a
    # missing answer asked again: the file is a memo, never trusted blindly.
    known = dict(line.split("\t", 1) for line in _read_lines(memo) if "\t" in line)
    known = {i: a for i, a in known.items() if re.fullmatch(_ANSWER, a)}
    if identity not in known:
        known[identity] = _ask_torch(torch)
        memo.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _core.write_file_atomic(str(memo), "".join(f"{i}\t{a}\n" for i, a in sorted(known.items())))
    return known[identity]


def _ask_torch(torch) -> str:
    if not torch.cuda.is_available():
        return "none"
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def cuda_available(cache_root: Path) -> bool:
    return _device_answer(cache_root) != "none"


# Which backend a request runs on: a device named by the caller wins, then
# REGISTRY_DEVICE (knobs.requested_device); with neither, CUDA when the kernel
# has a [cuda] section and a GPU is visible, else the CPU. "Is a GPU visible"
# is cuda_available: memoized in the cache per machine identity, so a cached
# `get` on a CPU machine never starts the CUDA driver.
def backend_for(device: str | None, has_cuda: bool = True) -> str:
    """"cpu" or "cuda": `device` if named (after REGISTRY_DEVICE), else the
    default for a kernel that has (or not) a [cuda] section."""
    chosen = knobs.requested_device(device)
    if chosen is not None:
        return chosen
    return _default_backend(has_cuda, knobs.cache_dir())


def _default_backend(has_cuda: bool, cache_root) -> str:
    return "cuda" if has_cuda and cuda_available(cache_root) else "cpu"


def for_manifest(manifest, requested: str | None, cache_root) -> str:
    """The backend a `get` of this kernel builds: `requested` (the caller's
    device, after REGISTRY_DEVICE) if given, else backend_for's default. Says
    what to change when the kernel has no section for it."""
    if requested is None:
        requested = _default_backend(manifest.cuda.present, cache_root)
    spec = section(manifest, requested)
    if spec.device_compiler and manifest.binding == "pybind":
        raise _core.RegistryError(
            f"kernel {manifest.name!r}: compiler = \"{spec.compiler}\" needs the generated binding (its "
            f"launchers are bound to the cubin's module); remove binding = \"pybind\" from {manifest.file}, "
            f"or use compiler = \"nvcc\""
        )
    if _cuda_only_without_gpu(manifest, requested, spec, cache_root):
        raise _environment_error(
            f"kernel {manifest.name!r} has only a [cuda] section ({manifest.file}) and no CUDA device is "
            f"visible on this machine, so it cannot run here. What this machine can do: run it here by adding "
            f"a [cpu] section with CPU sources to kernel.toml, or build its CUDA code for a GPU elsewhere by "
            f"setting TORCH_CUDA_ARCH_LIST (e.g. TORCH_CUDA_ARCH_LIST=9.0 python -m registry build "
            f"{manifest.name} --device cuda) and run it where there is a GPU"
        )
    if not spec.present:
        raise _core.RegistryError(
            f"kernel {manifest.name!r} has no [{requested}] section in {manifest.file}; "
            f"add one, or ask for device={'cpu' if requested == 'cuda' else 'cuda'!r}"
        )
    return requested


def _cuda_only_without_gpu(manifest, requested: str, spec, cache_root) -> bool:
    """A kernel without [cpu] asked for on a machine that cannot run its CUDA
    code: the CPU has no section, and a CUDA build has no GPU to target (nor
    TORCH_CUDA_ARCH_LIST to build for one elsewhere). One message says what
    is possible, rather than each side pointing at the other."""
    if manifest.cpu.present or not manifest.cuda.present:
        return False
    if requested == "cuda" and (not spec.present or (knobs.user_env("TORCH_CUDA_ARCH_LIST") or "").strip()):
        return False
    return not cuda_available(cache_root)


def section(manifest, backend: str):
    """The manifest's section for `backend`: [cuda] or [cpu]."""
    return manifest.cuda if backend == "cuda" else manifest.cpu


def cuda_arch_list(cache_root: Path) -> str:
    """The architectures a CUDA build targets: TORCH_CUDA_ARCH_LIST if set,
    else exactly the current device's compute capability (e.g. "9.0")."""
    configured = (knobs.user_env("TORCH_CUDA_ARCH_LIST") or "").strip()
    if configured:
        return configured
    answer = _device_answer(cache_root)
    if answer == "none":
        raise _environment_error("no CUDA device is visible; build for the CPU (device='cpu') "
                                 "or set TORCH_CUDA_ARCH_LIST to build for a GPU elsewhere")
    return answer


def arch_specific_list(arch_list: str) -> str:
    """TORCH_CUDA_ARCH_LIST with each entry from 9.0 on arch-specific ("9.0" -> "9.0a"):
    package_setup.arch_specific_list, the one an AOT package's setup.py uses too."""
    from registry import package_setup

    return package_setup.arch_specific_list(arch_list)


_ANSWER = r"none|\d+\.\d+"  # compiled on first use (re's cache): a CPU get never reads the memo


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _environment_error(message: str) -> Exception:
    from registry.errors import BuildEnvironmentError  # only when raising: a cached `get` never loads it

    return BuildEnvironmentError(message)


def cxx_command() -> str:
    """The C++ compiler torch would use (the user's: never the ccache wrapper a build in another thread set)."""
    return knobs.user_env("CXX") or "c++"


def nvcc_command() -> str:
    """The nvcc torch would use, found the way torch finds CUDA_HOME (CUDA_HOME
    or CUDA_PATH, then nvcc on PATH, then /usr/local/cuda) without importing
    torch.utils.cpp_extension, which costs a fresh process hundreds of ms.
    Here, not in ccache.py (which wraps both commands), so that a `get`
    finding everything cached does not import the build wiring."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        on_path = shutil.which("nvcc")
        home = str(Path(os.path.realpath(on_path)).parent.parent) if on_path else "/usr/local/cuda"
    candidate = Path(home) / "bin" / "nvcc"
    return str(candidate) if candidate.exists() else (shutil.which("nvcc") or str(candidate))


def _ask_version(invoked: str) -> str:
    done = subprocess.run([invoked, "--version"], capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"}, check=False)
    if done.returncode != 0:
        raise _environment_error(f"'{invoked} --version' failed: {(done.stderr or done.stdout).strip()[:200]}")
    return done.stdout + done.stderr


# Every command line a build runs is composed in command_lines.py: the keys
# cover it by the file's digest, not by importing it (a fresh process's cached
# `get` never loads it). Any edit there changes every key: exact, if more than
# a flag's own reach.
COMMAND_LINES = Path(__file__).with_name("command_lines.py")


@functools.lru_cache(maxsize=None)
def command_lines_digest() -> str:
    # hashlib, not the core: a cached get crosses into the core a few times only (tests/test_core_calls.py).
    return hashlib.sha256(COMMAND_LINES.read_bytes()).hexdigest()[:32]


def kernel_lib_recipe() -> str:
    """The host flags kernel libraries are compiled with, as a key input: a
    cache shared by machines with different CPUs keeps one library per flag set."""
    return f"host flags: {' '.join(host_cxx_flags()) or 'none'}"


def host_cxx_flags() -> tuple[str, ...]:
    """Default flags for the C++ units of kernel libraries, from this CPU
    (-mf16c where it has F16C; core/toolchain.h says why)."""
    return _core.HOST_CXX_FLAGS


@functools.lru_cache(maxsize=None)
def torch_libstdcxx() -> str | None:
    """The libstdc++ this process (torch) runs with: package_setup.torch_libstdcxx,
    the one an AOT package's setup.py uses too."""
    from registry import package_setup

    return package_setup.torch_libstdcxx()


def build_environment_for(manifest, backend: str, cache_root: Path) -> dict[str, str]:
    """build_environment for this kernel's [cuda] choices: nvcc is optional
    when NVRTC compiles the device code and c++ the launchers; the arch list
    is the arch-specific one when the manifest asks (arch_specific)."""
    spec = section(manifest, backend)
    nvcc_optional = spec.device_compiler == "nvrtc" and spec.launcher_compiler != "nvcc"
    return build_environment(backend, cache_root, nvcc_optional=nvcc_optional,
                             arch_specific=backend == "cuda" and spec.arch_specific)


def build_environment(backend: str, cache_root: Path, nvcc_optional: bool = False,
                      arch_specific: bool = False) -> dict[str, str]:
    """Key inputs describing the toolchain and versions for `backend`.
    nvcc_optional: device code goes through NVRTC, so a machine without the
    CUDA toolkit simply has no toolchain.nvcc. arch_specific: env.cuda_arch
    (what every CUDA path targets) names the arch-specific variants."""
    import torch

    memo = str(knobs.cache_path("toolchains", cache_root))
    env = {
        "env.torch": torch.__version__,
        "env.torch_cxx11_abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
        "env.python": f"{sys.version_info.major}.{sys.version_info.minor} {python_soabi()}",
        "env.platform": sys.platform,
        "toolchain.cxx": _core.compiler_identity_text(cxx_command(), memo, _ask_version),
        # How every build is compiled and linked (torch's libstdc++ by path
        # among it): not the libstdc++ path itself, whose lookup scans the
        # process's mappings (milliseconds with CUDA loaded) that a cached
        # `get` should not pay; a module records only the soname.
        "toolchain.command_lines": command_lines_digest(),
        "toolchain.kernel_lib": kernel_lib_recipe(),
    }
    if backend == "cuda":
        env["env.cuda"] = str(torch.version.cuda)
        arch_list = cuda_arch_list(cache_root)
        env["env.cuda_arch"] = arch_specific_list(arch_list) if arch_specific else arch_list
        try:
            env["toolchain.nvcc"] = _core.compiler_identity_text(nvcc_command(), memo, _ask_version)
        except RuntimeError:
            if not nvcc_optional:
                raise
        if knobs.user_env("PYTORCH_NVCC"):
            env["toolchain.pytorch_nvcc"] = knobs.user_env("PYTORCH_NVCC")
        if knobs.user_env("CC"):
            env["toolchain.nvcc_host_cc"] = knobs.user_env("CC")
    return env


def python_soabi() -> str:
    """sysconfig's SOABI ("cpython-312-x86_64-linux-gnu"), read off the first
    extension suffix the import system already holds (".cpython-312-x86_64-
    linux-gnu.so"): sysconfig's own answer costs a fresh process ~1.5 ms
    where torch has not loaded it (Python 3.12), a sixth of a cached `get`."""
    first = EXTENSION_SUFFIXES[0] if EXTENSION_SUFFIXES else ""
    if first.startswith(".") and first.endswith(".so") and first.count(".") == 2 and first != ".abi3.so":
        return first[1:-3]
    import sysconfig

    return str(sysconfig.get_config_var("SOABI"))


def fingerprint(env: dict[str, str]) -> str:
    return _core.hash_fields_hex(sorted(env.items()))
