"""Host launchers compiled by nvcc ([cuda] launcher_compiler = "nvcc"), for a
launcher that includes CUDA headers or a library's host side: CUTLASS fills
its TMA descriptors (cute's make_tma_copy) only under nvcc (__CUDACC__), and
cute's host code uses CUDA's vector and runtime types.

Each source is compiled as CUDA (`nvcc -x cu -c`), with the user's host
compiler (-ccbin) and the same host flags as a plain launcher. The kernels
still live in the cubin and launch through kreg/launch.h; the launcher's own
device pass targets the cubin's arch, so any device code a header brings is
compiled for the GPU the cubin is (and __CUDA_ARCH_LIST__, which the host
pass sees too, is the same). nvcc registers each object's fatbin with the
CUDA runtime at load, so the library links that runtime, static: it stays
torch-free, loads in an isolated worker that has no torch, and needs no
libcudart on the library path. The link itself is the direct build's
(-z defs, torch's libstdc++), with the runtime's libraries added.

Not through ccache: nvcc's host compile runs in a temporary folder, and the
registry's own cache keeps the library by content (the key covers nvcc's
identity and the arch: core/build_keys.h).
"""
from __future__ import annotations

import functools
import os
import re
import subprocess

from registry import command_lines, environment


def compile_command(plan, source: str, obj: str, depfile: str, flags: list[str], host_cxx: str) -> list[str]:
    """nvcc's command compiling one launcher source to `obj`, with the host
    compiler's dependency list (-MMD: project headers) in `depfile`."""
    return command_lines.nvcc_launcher_compile(environment.nvcc_command(), plan.launcher_arch, host_cxx, flags,
                                               depfile, source, obj)


def runtime_link_flags() -> list[str]:
    """The static CUDA runtime and what it needs, from nvcc's own library folders."""
    return command_lines.nvcc_runtime_libs(list(_library_dirs(environment.nvcc_command())))


@functools.lru_cache(maxsize=4)
def _library_dirs(nvcc: str) -> tuple[str, ...]:
    """The folders nvcc links from (its LIBRARIES line: the toolkit's lib and
    lib/stubs), asked once per nvcc: a wrapper script or a relocated toolkit
    puts them where the nvcc path does not say."""
    done = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                          capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}, check=False)
    line = next((line for line in (done.stdout + done.stderr).splitlines() if "LIBRARIES=" in line), "")
    return tuple(os.path.normpath(d) for d in re.findall(r'-L"?([^"\s]+)"?', line))
