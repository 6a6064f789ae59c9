"""How a worker is started: its command line and environment, per flavor.

  plain     python -E -s -S registry/isolation/worker.py FD (no site, no torch:
            it starts in tens of milliseconds), LD_LIBRARY_PATH extended by
            torch's lib folder, the nvidia wheels' lib folders and the CUDA
            toolkit's lib64, which an nvcc-built kernel library may need
  asan      the same with libasan preloaded (`$CXX -print-file-name=libasan.so`):
            a checked CPU build's sanitizers need their runtime first in the
            process. Errors halt the worker and are written to its log.
  memcheck  the same under `compute-sanitizer --tool memcheck --padding` (CUDA
            toolkit). The worker copies each tensor into its own allocation of its
            exact size; without padding two of them may sit back to back (sizes
            on the allocation granularity: 512 bytes, 2 MiB), and a write just
            past one lands in the next, which memcheck sees as valid memory.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

WORKER_SCRIPT = str(Path(__file__).resolve().parent / "worker.py")

ASAN_OPTIONS = "halt_on_error=1:abort_on_error=1:detect_leaks=0:symbolize=1:print_summary=1:detect_odr_violation=0"
UBSAN_OPTIONS = "halt_on_error=1:abort_on_error=1:print_stacktrace=1:symbolize=1"
# Bytes memcheck reserves after every allocation, so that an access up to
# this far past an allocation's end is reported as out of bounds.
MEMCHECK_PADDING = 65536


def log_dir() -> Path:
    from registry import knobs

    path = knobs.cache_path("tmp") / "isolation"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def library_path() -> str:
    """torch's lib folder and the nvidia wheels' lib folders, without importing torch."""
    found = importlib.util.find_spec("torch")
    folders = []
    if found is not None and found.submodule_search_locations:
        torch_dir = Path(next(iter(found.submodule_search_locations)))
        folders.append(torch_dir / "lib")
        folders += sorted(torch_dir.parent.glob("nvidia/*/lib")) + sorted(torch_dir.parent.glob("nvidia/cu*/lib"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:  # the CUDA runtime an nvcc-built library may link
            folders.append(Path(home) / "lib64")
    existing = os.environ.get("LD_LIBRARY_PATH", "")
    return os.pathsep.join([str(f) for f in folders if f.is_dir()] + ([existing] if existing else []))


@functools.lru_cache(maxsize=None)
def asan_runtime() -> str:
    from registry import environment

    compiler = environment.cxx_command()
    compiler = compiler[0] if isinstance(compiler, (list, tuple)) else compiler
    try:
        path = subprocess.run([compiler, "-print-file-name=libasan.so"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        path = ""
        reason = str(error)
    else:
        reason = f"{compiler} -print-file-name=libasan.so gave {path!r}"
    if not os.path.isabs(path) or not os.path.exists(path):
        from registry.errors import BuildEnvironmentError

        raise BuildEnvironmentError(
            f"a checked CPU build needs AddressSanitizer's runtime, libasan.so, and it was not found ({reason}). "
            f"Install the compiler's sanitizer runtime (e.g. the libasan package of your gcc) and try again.")
    return os.path.realpath(path)


@functools.lru_cache(maxsize=None)
def compute_sanitizer() -> str:
    candidates = [shutil.which("compute-sanitizer")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "compute-sanitizer"))
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    from registry.errors import BuildEnvironmentError

    raise BuildEnvironmentError(
        "a checked CUDA call runs under compute-sanitizer (memcheck), which is part of the CUDA toolkit, and it "
        "was not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin. Install the CUDA toolkit (or put "
        "its bin folder on PATH), or call registry.get(name, isolate=True) for isolation without the check.")


def command(flavor: str) -> tuple[list[str], dict]:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path()
    env.pop("PYTHONPATH", None)
    python = [sys.executable, "-E", "-s", "-S", WORKER_SCRIPT]
    if flavor == "asan":
        env["LD_PRELOAD"] = asan_runtime() + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        env["ASAN_OPTIONS"] = ASAN_OPTIONS
        env["UBSAN_OPTIONS"] = UBSAN_OPTIONS
        return python, env
    if flavor == "memcheck":
        return [compute_sanitizer(), "--tool", "memcheck", "--padding", str(MEMCHECK_PADDING), "--print-limit", "20",
                "--show-backtrace", "device", *python], env
    return python, env
