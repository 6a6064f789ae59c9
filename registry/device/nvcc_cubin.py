"""`nvcc -cubin` as a device compiler ([cuda] compiler = "nvcc-cubin"): for
device code NVRTC cannot take (host-heavy templates, CUTLASS), with NVRTC's
shape: device_sources -> one cubin, loaded with the driver API and launched by
host launchers through kreg/launch.h (cubin_build.py does the snapshot,
mirror and key; this file only runs the compiler).

Why -cubin and not `nvcc -c` + link: -cubin skips the host half of nvcc
(cudafe++'s host output, the host compile of the stub, the link), which is
most of `nvcc -c`'s time; the cubin is all the launch path needs.

Why not through ccache: ccache (4.x) counts an `nvcc -cubin` call as a link
("Called for linking") and caches nothing, and the staging folder the unit is
compiled in differs per build. The registry's cache already keeps each cubin
under a key of its content, so going back to earlier code finds its cubin.

What the key covers besides the mirrored project files: nvcc's identity (the
resolved binary and its version line) and the host compiler nvcc preprocesses
with (passed as -ccbin, identified the same way): the CUDA toolkit's and the
system's headers come with those two. nvcc's dependency output is read
after each compile: a project file nvcc read around the mirror (an absolute
#include) is added to the snapshot, so its content is keyed too.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from registry import _core, environment, knobs


def command(nvcc: str, options: list[str], deps: str, unit: str, cubin: str) -> list[str]:
    """nvcc's command line for one unit. The dependency list comes from the
    host preprocessor's own pass (-Xcompiler): nvcc's -MD would run a second
    preprocessing pass (~15 % of the compile)."""
    depend = [f"-Xcompiler=-MD,-MF,{deps}"] if "," not in deps else ["-MD", "-MF", deps]
    return [nvcc, *options, *depend, unit, "-o", cubin]


# What nvcc is handed beyond the options, for the key (cubin_build.keyed_recipe
# adds the unit's text and the include paths): the command's shape.
RECIPE = " ".join(command("<nvcc>", ["<options>"], "<unit>.d", "<unit>.cu", "<unit>.cubin"))


def _ask_version(invoked: str) -> str:
    from registry.environment import _ask_version as ask

    return ask(invoked)


def host_compiler() -> str:
    """The host compiler nvcc preprocesses with: $CC as torch passes it, else gcc (nvcc's default)."""
    return os.environ.get("CC") or "gcc"


class NvccCubin:
    """One nvcc and its host compiler, identified once per process (the
    identities are memoized in the cache's toolchains.toml by the binaries' stat)."""

    name = "nvcc -cubin"
    recipe = RECIPE
    extra_scan_dirs: list[str] = []  # nvcc has the real <cstdint>: the NVRTC shims stay out
    system_include_dir = None

    def __init__(self, nvcc: str | None = None, host: str | None = None, cache_root: Path | None = None):
        self.nvcc = nvcc or environment.nvcc_command()
        self.host = host or host_compiler()
        memo = str(knobs.cache_path("toolchains", cache_root or knobs.cache_dir()))
        try:
            self._identity = _core.compiler_identity_text(self.nvcc, memo, _ask_version)
            self._host_identity = _core.compiler_identity_text(self.host, memo, _ask_version)
        except RuntimeError as error:
            from registry.errors import BuildEnvironmentError

            raise BuildEnvironmentError(
                f"compiler = \"nvcc-cubin\" needs the CUDA toolkit's nvcc ({self.nvcc}) and a host compiler "
                f"({self.host}): {error}. Install the toolkit (or set CUDA_HOME), or use compiler = \"nvrtc\""
            ) from None

    def identity(self) -> str:
        """What status() shows: "nvcc -cubin <resolved nvcc> | <version line>"."""
        return f"nvcc -cubin {self._identity}"

    def key_inputs(self) -> list[tuple[str, str]]:
        return [("toolchain.nvcc", self._identity), ("toolchain.nvcc_host", self._host_identity)]

    def options(self, manifest, arch: str) -> list[str]:
        return ["-cubin", f"-arch={arch}", "-std=c++17", "-ccbin", self.host, *manifest.cuda.device_cflags]

    def compile(self, unit: bytes, unit_name: str, options: list[str]) -> tuple[bytes | None, str, list[str]]:
        """(cubin or None on a compile error, nvcc's output, the files nvcc read)."""
        unit_path = Path(unit_name)
        unit_path.write_bytes(unit)
        cubin, deps = unit_path.with_suffix(".cubin"), unit_path.with_suffix(".d")
        done = subprocess.run(command(self.nvcc, options, str(deps), str(unit_path), str(cubin)),
                              capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}, check=False)
        log = done.stdout + done.stderr
        if done.returncode != 0 or not cubin.is_file():
            return None, log, []
        return cubin.read_bytes(), log, read_dependency_file(deps)


def make(manifest) -> NvccCubin:
    """The toolkit's nvcc and its host compiler (device/compiler.py's COMPILERS)."""
    return NvccCubin()


def read_dependency_file(path: Path) -> list[str]:
    """The prerequisites of a make rule written by -MD ("out: a.h \\\n b.h"), with
    escaped spaces; [] when the file is missing."""
    try:
        text = path.read_text()
    except OSError:
        return []
    _, _, prerequisites = text.partition(": ")
    words, current = [], ""
    for token in prerequisites.replace("\\\n", " ").split(" "):
        if token.endswith("\\") and not token.endswith("\\\\"):
            current += token[:-1] + " "
            continue
        current += token
        if current.strip():
            words.append(current.strip())
        current = ""
    return [os.path.normpath(w) for w in words]
