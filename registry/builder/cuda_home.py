"""ld's "cannot find -lcudart" -> which CUDA_HOME to set.

torch links a CUDA module against $CUDA_HOME/lib64. Without CUDA_HOME it
takes the folder above the bin/ holding the nvcc on PATH: where that nvcc is a
wrapper script or a link outside the toolkit (/usr/local/bin/nvcc), the guess
(/usr/local) has no CUDA runtime and the link fails naming only the library.
Say what torch took and which folder to set instead.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

_NOT_FOUND = re.compile(r"cannot find -l(?P<lib>cudart|cuda|cublas|cublasLt|curand|cufft|cusparse|cusolver)\b")


def toolkit_candidates() -> list[str]:
    """Folders that hold a CUDA toolkit with its runtime, the likeliest first:
    the toolkit the nvcc on PATH runs (through links), /usr/local/cuda, then
    the versioned /usr/local/cuda-* folders, newest first."""
    found = []
    on_path = shutil.which("nvcc")
    if on_path:
        found.append(str(Path(os.path.realpath(on_path)).parent.parent))
    found.append("/usr/local/cuda")
    found += sorted((str(p) for p in Path("/usr/local").glob("cuda-*")), reverse=True)
    return [f for f in dict.fromkeys(found) if _has_runtime(f)]


def _has_runtime(home: str) -> bool:
    return any(Path(home, lib, "libcudart.so").exists() for lib in ("lib64", "lib", "targets/x86_64-linux/lib"))


def diagnostics(log: str, where: str) -> list:
    """One diagnostic when the link could not find a CUDA library; `where` is
    the file it points at (the manifest)."""
    m = _NOT_FOUND.search(log)
    if m is None:
        return []
    from registry.errors import Diagnostic

    set_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    extension = sys.modules.get("torch.utils.cpp_extension")
    used = set_home or (getattr(extension, "CUDA_HOME", None) if extension is not None else None)
    if set_home:
        why = f"CUDA_HOME={set_home} has no lib64/lib{m['lib']}.so"
    elif used:
        why = (f"CUDA_HOME is not set, and torch took {used} (the folder above the nvcc on PATH), "
               f"which has no lib64/lib{m['lib']}.so")
    else:
        why = "CUDA_HOME is not set, and torch found no CUDA toolkit"
    candidates = [c for c in toolkit_candidates() if c != used]
    toolkit = (f"{candidates[0]} (the toolkit found here)" if candidates else
               "the CUDA toolkit's folder (the one holding bin/nvcc and lib64/libcudart.so)")
    what = (f"set CUDA_HOME={toolkit} in the environment Python (the notebook's kernel) starts with, and "
            f"restart it: torch reads CUDA_HOME once")
    return [Diagnostic(where, 1, None, "error",
                       f"the link cannot find the CUDA library lib{m['lib']}: {why}. To build CUDA code, {what}")]
