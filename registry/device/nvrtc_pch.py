"""NVRTC with the kernel's prelude precompiled ([cuda] prelude = "x.cuh",
compiler = "nvrtc"): for heavy device code (CUTLASS, CuTe) whose cost is
template instantiation, not parsing.

The prelude is compiled first in the unit, then `namespace kreg_prelude_end
{}` (NVRTC's precompiled header stops at the first token that is not a
directive), then the device sources. The prelude should itself instantiate
what is heavy (the collectives, the kernel's operator()): a PCH keeps the
instantiations made before its stop, so an edit of the device sources
compiles only what they add. Measured on kernels/gemm_nvrtc:
bench/results/gemm_edit_loop-cpu.md.

Exactness. The cubin's key is cubin_build's (every byte compiled, the
prelude among the device files), with this recipe and the prelude's name. The
PCH is an accelerator reused only for the same *prelude content*: its
prelude key hashes the bytes of every mirrored file except those reachable
only from the device sources (a file found by compiling, e.g. through a
macro-spelled include, counts as the prelude's), the options, NVRTC's
identity and libcu++'s. NVRTC does not check that a PCH's headers are
unchanged (an edited header kept the old PCH when tried), so nothing else
may pick it.

The PCH lives in a compile server (device/pch_server.py), one per cache and
NVRTC, started on the first compile and replaced when it died. NVRTC accepts
a PCH only with the command line it was made with, include paths included:
each compile runs in the server's workspace, `tmp/<server pid>-pch/<prelude
key>/src`, a copy of the staging folder's mirror kept exact (files written
only when their bytes differ, extra files removed), so the prelude's files
keep their paths and the device sources can change.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from registry import _core, environment, knobs
from registry.builder import keys
from registry.device import pch_server
from registry.device.mirror import mirrored_files
from registry.errors import RegistryError

PRELUDE_END = "namespace kreg_prelude_end {}\n"


def pch_unit(unit: str) -> str:
    """The unit NVRTC compiles: the prelude's #include (the driver's unit puts
    it first), the stop of the precompiled header, the device sources."""
    first, _, rest = unit.partition("\n")
    return first + "\n" + PRELUDE_END + rest


def cccl_options(cccl) -> list[str]:
    """libcu++ from the wheel or the toolkit (cccl_root), after the mirror and
    the wheel's headers, so they win over the toolkit's copies."""
    return [f"-I{cccl / 'cccl'}", f"-I{cccl}"] if cccl else []


# What NVRTC is handed beyond the options and the driver's unit, for the key
# (cubin_build.keyed_recipe): the unit as recomposed here, the libcu++ paths.
RECIPE = " ".join([pch_unit("#include <prelude>\n#include <device sources>\n"),
                   *cccl_options(Path("<libcu++>"))])

# A server with no compile for this long exits; the next compile starts one.
IDLE_SECONDS = 1800.0

# What each compile did with the prelude ("created", "used", "heap", "none"): tests and benchmarks read it.
pch_events: list[str] = []


class PchServer:
    """The client side of one compile server process."""

    def __init__(self, library: str, cache_root: Path):
        self.library, self.cache_root = library, Path(cache_root)
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.last_reply: dict = {}  # "pch", "seconds", "phases" of the last compile
        self.lock = threading.Lock()  # one request at a time: the server is one NVRTC

    def _start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-E", "-s", "-S", pch_server.__file__, self.library, str(IDLE_SECONDS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        self.starts += 1

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def workspace(self) -> Path:
        # tmp/<pid>-...: the cache's clean-up removes it once the server is gone.
        return knobs.cache_path("tmp", self.cache_root) / f"{self.process.pid}-pch"

    def request(self, make_request) -> dict:
        """make_request(workspace) -> the request; sent to a live server,
        once more to a new one if this one died before replying."""
        with self.lock:
            for attempt in (1, 2):
                if not self.alive():
                    self._start()
                try:
                    pch_server.write_message(self.process.stdin, make_request(self.workspace))
                    reply = pch_server.read_message(self.process.stdout)
                except (BrokenPipeError, OSError, EOFError):
                    reply = None
                if reply is not None:
                    self.last_reply = {k: v for k, v in reply.items() if k != "cubin"}
                    if "error" in reply:
                        raise RegistryError(f"the NVRTC compile server failed: {reply['error']}")
                    return reply
                self.stop()
            raise RegistryError("the NVRTC compile server died twice while compiling; see whether the machine "
                                "runs out of memory (the prelude's precompiled header needs a few GB), or remove "
                                "prelude from the kernel's [cuda] table")

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                stream.close()


_servers: dict[tuple[str, str], PchServer] = {}


def server_for(library: str, cache_root: Path | None = None) -> PchServer:
    root = Path(cache_root or knobs.cache_dir()).resolve()
    found = _servers.get((library, str(root)))
    if found is None:
        found = _servers[(library, str(root))] = PchServer(library, root)
    return found


def cccl_root(nvrtc_include: str | None) -> Path | None:
    """The folder holding cccl/cuda/std (libcu++): the NVRTC wheel's headers
    if they have it, else the CUDA toolkit's. CuTe includes <cuda/std/...>
    and, from CUDA 13, <cccl/cuda/std/...> under NVRTC."""
    candidates = [Path(nvrtc_include)] if nvrtc_include else []
    candidates += [Path(d) for d in _nvcc_include_dirs(environment.nvcc_command())]
    return next((c for c in candidates if (c / "cccl" / "cuda" / "std" / "type_traits").is_file()), None)


@functools.lru_cache(maxsize=4)
def _nvcc_include_dirs(nvcc: str) -> tuple[str, ...]:
    """The toolkit's include folders as nvcc itself says (its INCLUDES line):
    nvcc may be a wrapper script away from the toolkit."""
    try:
        done = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                              capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}, check=False)
    except OSError:
        return ()
    line = next((line for line in (done.stdout + done.stderr).splitlines() if "INCLUDES=" in line), "")
    return tuple(os.path.normpath(d) for d in re.findall(r'-I"?([^"\s]+)"?', line))


class NvrtcPchDevice:
    """NVRTC through the compile server, with the prelude's PCH. `plain` is
    nvrtc_device's NvrtcDevice (options, shims, identity); `sources` the
    device sources, the prelude first; `mirror_path` cubin_build's map of a
    project file into the staging mirror (passed in: this module is below
    cubin_build)."""

    name = "NVRTC (precompiled prelude)"
    recipe = RECIPE

    def __init__(self, plain, manifest, sources: list[str], mirror_path, cache_root: Path | None = None):
        self.plain, self.nvrtc, self.manifest = plain, plain.nvrtc, manifest
        self.sources, self.mirror_path = sources, mirror_path
        self.extra_scan_dirs, self.system_include_dir = plain.extra_scan_dirs, plain.system_include_dir
        self.server = server_for(plain.nvrtc.library, cache_root)
        self.cccl = cccl_root(plain.nvrtc.include_dir)
        self.phases: dict[str, float] = {}  # NVRTC's --time of the last compile: phase -> seconds
        self.prelude_event = ""             # what the last compile did with the prelude (pch_events)

    def identity(self) -> str:
        return self.plain.identity()

    def options(self, manifest, arch: str) -> list[str]:
        return self.plain.options(manifest, arch)

    def key_inputs(self) -> list[tuple[str, str]]:
        version = self.cccl / "cccl" / "cuda" / "std" / "__cccl" / "version.h" if self.cccl else None
        cccl = (f"{self.cccl} {hashlib.sha256(version.read_bytes()).hexdigest()}"
                if version is not None and version.is_file() else "none")
        return [*self.plain.key_inputs(), ("nvrtc.prelude", self.manifest.cuda.prelude), ("nvrtc.cccl", cccl)]

    def compile(self, unit: bytes, unit_name: str, options: list[str],
                ltoir: bool = False) -> tuple[bytes | None, str, list[str]]:
        """ltoir: the unit's LTO-IR instead of a cubin (device/lto_link.py)."""
        staging_src = os.path.dirname(unit_name)
        options = options + cccl_options(self.cccl)
        files = mirrored_files(staging_src)
        body_only = self._body_only(staging_src)
        # The options name the staging folder, new for each build: keyed without it.
        prelude_key = _prelude_key({name: data for name, data in files.items() if name not in body_only},
                                   [o.replace(staging_src, "<src>") for o in options], repr(self.key_inputs()))
        unit_text = pch_unit(unit.decode())

        def make_request(workspace: Path) -> dict:
            src = str(workspace / prelude_key / "src")
            _sync(files, src)
            return {"unit": unit_text.replace(staging_src, src).encode(), "name": unit_name.replace(staging_src, src),
                    "options": [o.replace(staging_src, src) for o in options], "prelude_key": prelude_key,
                    "pch_path": str(workspace / prelude_key / "prelude.pch"),
                    "time_path": str(workspace / prelude_key / "time.csv"), "ltoir": ltoir}

        reply = self.server.request(make_request)
        pch_events.append(reply["pch"])
        # Where this compile's time went, for the cell and the status (cubin_build.phase_text).
        self.phases, self.prelude_event = dict(reply.get("phases") or {}), reply["pch"]
        if self.cccl is None and reply["cubin"] is None and "cuda/std/" in reply["log"]:
            from registry.errors import BuildEnvironmentError

            raise BuildEnvironmentError(
                f"{self.manifest.name}'s device code includes libcu++ (<cuda/std/...>: CuTe and CUTLASS do), which "
                "neither the NVRTC wheel nor a CUDA toolkit brings here: pip install nvidia-cuda-cccl (the CUDA "
                "version of torch's wheels), or install the CUDA toolkit (or set CUDA_HOME)")
        src = str(self.server.workspace / prelude_key / "src")
        return reply["cubin"], reply["log"].replace(src, staging_src), []

    def _body_only(self, staging_src: str) -> set[str]:
        """Mirror names of the files only the device sources reach (not the prelude)."""
        dirs = keys.include_dirs(self.manifest) + list(self.extra_scan_dirs)
        prelude, bodies = self.sources[0], self.sources[1:]
        reached = set(_core.scan_include_closure(bodies, dirs).files)
        reached -= set(_core.scan_include_closure([prelude], dirs).files)
        staging = Path(staging_src).parent
        return {os.path.relpath(self.mirror_path(p, self.manifest, staging), staging_src) for p in reached}


def _prelude_key(files: dict[str, bytes], options: list[str], identity: str) -> str:
    """identity: NVRTC's and libcu++'s (read in place, not mirrored), as the cubin's key has them."""
    digest = hashlib.sha256(f"{RECIPE}\0{identity}\0".encode())
    for option in options:
        digest.update(option.encode() + b"\0")
    for name in sorted(files):
        data = files[name]
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()[:32]


def _sync(files: dict[str, bytes], dest: str) -> None:
    """dest holds exactly `files`: a file is written only when its bytes
    differ (the prelude's keep their stamps), a file not among them removed
    (the compile must not read a header the key did not cover)."""
    for name, data in files.items():
        path = os.path.join(dest, name)
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for folder, _, names in os.walk(dest):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.relpath(path, dest) not in files:
                os.remove(path)

