"""The interface of one build step, shared by both build paths: what to build
(BuildPlan, composed by recipe.py), what a build returns (BuildResult), and
the count of compiles this process ran (builds_run; tests count them).

The two paths (torch_extension.py: torch's cpp_extension.load; direct.py:
the registry's own compiler call) both use this module and failure.py, and
neither imports the other; compile.run_build picks one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from registry import environment
from registry.knobs import REGISTRY_INCLUDE

# The launch API's implementation, compiled into launcher libraries of cubins
# (core/build_keys.cc lists it among their sources; builder/keys.py names it too).
LAUNCH_RUNTIME = REGISTRY_INCLUDE / "kreg" / "launch_runtime.cc"


@dataclass
class BuildPlan:
    kernel: str
    backend: str
    kind: str
    module_name: str
    sources: list[str]
    cflags: list[str] = field(default_factory=list)
    cuda_cflags: list[str] = field(default_factory=list)
    ldflags: list[str] = field(default_factory=list)
    include_paths: list[str] = field(default_factory=list)
    project_dirs: list[str] = field(default_factory=list)  # deps under these are recorded
    estimate_s: float | None = None  # the previous build's seconds, for the progress bar
    # False for host launchers of NVRTC-built device code: plain C++, no CUDA toolkit needed.
    cuda_toolkit: bool = True
    # Torch-free kernel libraries: the registry's own compiler call (direct.py), not load().
    direct: bool = False
    # kernel-lib only: the manifest's ops, whose launchers (core/launcher_header.h)
    # the library must export; a failed compile is explained against them.
    ops: list = field(default_factory=list)
    manifest_file: str = ""
    # kernel-lib only: the launcher symbols the library must export, as the
    # plan names them (core/plan.h); asked of the core when empty.
    launchers: list[str] = field(default_factory=list)
    # kernel-lib only: the library of this kernel loaded before, if any (a
    # direct build links lean when it needed no C++ runtime; direct.py).
    previous_library: str | None = None
    # CUDA builds: the arch list the key was computed for (env.cuda_arch).
    cuda_arch: str | None = None
    # kernel-lib of a cubin whose launchers nvcc compiles ([cuda] launcher_compiler
    # = "nvcc", nvcc_launchers.py): the arch of their device pass, the cubin's; else "".
    launcher_arch: str = ""

    @property
    def is_python_module(self) -> bool:
        return self.kind == "module"

    @property
    def with_cuda(self) -> bool:
        return self.backend == "cuda" and self.cuda_toolkit

    @property
    def artifact(self) -> str:
        return f"{self.module_name}.so"

    def through_ccache(self, team=None) -> bool:
        """Whether building this runs a compiler through ccache (when ccache
        is on): not a direct build's one compile-and-link step."""
        return not (self.direct and self.one_step(team))

    def one_step(self, team=None) -> bool:
        """A direct build in one compile-and-link step (the fastest edit): one
        source to compile, and no remote storage that a compile through ccache
        could be served from or shared with. `team`: the remote cache, asked
        before compiler_environment has set CCACHE_REMOTE_STORAGE from it."""
        from registry.builder import ccache

        if self.launcher_arch:
            return False  # nvcc compiles, the host compiler links (nvcc_launchers.py)
        return len(self.compiled_sources()) == 1 and not ccache.remote_storage_configured(team)

    def links_launch_runtime(self) -> bool:
        """Whether the launch runtime (kreg/launch_runtime.cc), a source of
        every launcher library of a cubin, is linked as the object compiled
        once per compiler (launch_runtime.py) instead of compiled with the
        kernel's flags. It reads nothing of the kernel's, yet the launcher
        prototypes force-included into every source change with the op's
        signature: compiled with them, a signature edit compiled it again
        beside the launcher, and linked in a step of its own."""
        return self.direct and not sanitized(self) and any(Path(s) == LAUNCH_RUNTIME for s in self.sources)

    def compiled_sources(self) -> list[str]:
        """The sources this build compiles (the launch runtime aside when it
        is linked as its object)."""
        if not self.links_launch_runtime():
            return list(self.sources)
        return [s for s in self.sources if Path(s) != LAUNCH_RUNTIME]

    def describe(self) -> str:
        return {"kernel-lib": "the kernel library", "binding": "the shared binding", "module": "the module"}[self.kind]


@dataclass
class BuildResult:
    staging: Path
    artifact: str
    deps: list[str]
    seconds: float
    loaded: object = None  # kernel-lib: its ctypes handle; module: the module; binding: None
    warnings: list[str] = field(default_factory=list)  # what the compilers warned (compiler_warnings.py)


# Every compile this process ran, as (kernel, kind): tests count them.
builds_run: list[tuple[str, str]] = []


def torch_libstdcxx_flags() -> list[str]:
    """torch's libstdc++ by path, so every module shares it (see
    environment.torch_libstdcxx and command_lines.link_flags)."""
    lib = environment.torch_libstdcxx()
    return [lib] if lib else []


def sanitized(plan: BuildPlan) -> bool:
    """A checked build (registry/isolation/checked.py): its sanitizer runtime
    must come first in a process, so this process never opens it; only a
    worker started with that runtime does (and reports a missing launcher)."""
    return plan.kind == "kernel-lib" and any(f.startswith("-fsanitize=") for f in plan.ldflags)
