"""One compile, through torch.utils.cpp_extension.load, into a staging folder.

What is built (see ARCHITECTURE.md):
  kernel-lib  the kernel's own sources, no torch header, as a shared library
              named kreg_<kernel>_<backend>: a kernel edit recompiles only this
  binding     the generated TORCH_LIBRARY unit for one op signature, named
              kreg_<signature hash>; compiled once, reused by every version
  module      a hand-written PYBIND11_MODULE kernel, everything in one module
              whose name carries the key (slower: torch/extension.h each time)

load()'s name is stable per kernel for kernel-libs, so the
-DTORCH_EXTENSION_NAME it puts on every unit does not change between versions
and ccache can serve unchanged units.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from registry import environment, knobs
from registry.diagnostics import parse_diagnostics
from registry.errors import BuildError
from registry.kernel_load import open_library
from registry.progress import build_progress


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
    # Torch-free kernel libraries: the registry's own compiler call (direct_build.py), not load().
    direct: bool = False
    # kernel-lib only: the manifest's ops, whose launchers (core/launcher_header.h)
    # the library must export; a failed compile is explained against them.
    ops: list = field(default_factory=list)
    manifest_file: str = ""
    # kernel-lib only: the launcher symbols the library must export, as the
    # plan names them (core/plan.h); asked of the core when empty.
    launchers: list[str] = field(default_factory=list)
    # kernel-lib only: the library of this kernel loaded before, if any (a
    # direct build links lean when it needed no C++ runtime; direct_build.py).
    previous_library: str | None = None

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
        if self.direct:
            from registry import direct_build

            return not direct_build.one_step(self, team)
        return True

    def describe(self) -> str:
        return {"kernel-lib": "the kernel library", "binding": "the op binding", "module": "the module"}[self.kind]


@dataclass
class BuildResult:
    staging: Path
    artifact: str
    deps: list[str]
    seconds: float
    loaded: object = None  # kernel-lib: its ctypes handle; module: the module; binding: None


# Every compile this process ran, as (kernel, kind): tests count them.
builds_run: list[tuple[str, str]] = []


def run_build(plan: BuildPlan, staging: Path) -> BuildResult:
    if plan.direct:
        from registry import direct_build

        return direct_build.build(plan, staging)
    cpp_extension = _import_cpp_extension()

    builds_run.append((plan.kernel, plan.kind))

    # load() keeps an in-memory version per name and appends _v<N> to it when
    # its inputs change; our names are chosen per build, so reset it.
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(plan.module_name, None)
    start = time.perf_counter()
    try:
        # A progress bar after 0.5 s; on any exception (Ctrl-C included) it also
        # stops the compilers still running in the staging folder.
        with build_progress(plan.kernel, plan.describe(), plan.estimate_s, build_dir=staging):
            options = dict(name=plan.module_name, sources=plan.sources, extra_cflags=plan.cflags,
                           extra_cuda_cflags=plan.cuda_cflags, extra_ldflags=plan.ldflags + _libstdcxx_flags(),
                           extra_include_paths=plan.include_paths, build_directory=str(staging),
                           verbose=knobs.verbose(), with_cuda=plan.with_cuda)
            if plan.kind in ("kernel-lib", "binding"):
                # Built, not loaded: load() would dlopen it here, in the staging
                # folder, for the life of the process (see check_launchers_at);
                # kernel_load opens the published file.
                cpp_extension._write_ninja_file_and_build_library(
                    **options, extra_sycl_cflags=[], with_sycl=False, is_standalone=False)
                loaded = None
            else:
                loaded = cpp_extension.load(**options, is_python_module=plan.is_python_module)
    except (RuntimeError, OSError, ImportError) as error:
        raise build_error(plan, _error_text(error), staging) from None
    seconds = time.perf_counter() - start
    deps = _ninja_deps(staging, plan.project_dirs)
    for obj in staging.glob("*.o"):
        obj.unlink()
    if plan.kind == "kernel-lib":
        # Checked here and closed again; kernel_load opens the published file.
        check_launchers_at(plan, str(staging / plan.artifact))
        loaded = None
    return BuildResult(staging, plan.artifact, deps, seconds, loaded)


def build_error(plan: BuildPlan, log: str, staging: Path) -> BuildError:
    """What a failed compile or link raises, whoever ran the compiler."""
    # Under CCACHE_BASEDIR the compiler names files inside the cache
    # relative to the staging folder, which is about to go: resolve now.
    diagnostics = [d if os.path.isabs(d.file) else d._replace(file=os.path.normpath(staging / d.file))
                   for d in parse_diagnostics(log)]
    if "undefined" in log and plan.kind != "binding":
        diagnostics = _undefined_symbol_diagnostics(plan, log) + diagnostics
    if plan.ops:
        diagnostics = _launcher_mismatches(plan, diagnostics, log) + diagnostics
    return BuildError(plan.kernel, plan.describe(), diagnostics, log)


def _error_text(error: BaseException) -> str:
    """The error and what caused it: load() reports a library that does not
    load as "Could not load this library: <path>" and keeps the reason (an
    undefined symbol, say) only in the exception it chains."""
    parts, cause = [str(error)], error.__cause__ or error.__context__
    while cause is not None and len(parts) < 5:
        parts.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    return "\n".join(parts)


def _undefined_symbol_diagnostics(plan: BuildPlan, log: str) -> list:
    """Each undefined symbol, at the kernel's declaration of it (link_errors.py)."""
    from registry import _core, link_errors

    closure = _core.scan_include_closure(plan.sources, plan.include_paths)
    headers = [f for f in closure.files if f not in plan.sources]
    return link_errors.diagnostics(log, plan.sources, headers, plan.kernel, f"[{plan.backend}]")


class _NoCudaRuntimeNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No CUDA runtime is found")


def _import_cpp_extension():
    """torch.utils.cpp_extension. Its import looks for a CUDA toolkit and, on a
    machine that has one but no GPU, logs "No CUDA runtime is found": noise on
    a CPU build, and on a CUDA build for a GPU elsewhere (TORCH_CUDA_ARCH_LIST)
    too, where it reads as an error: the registry says itself when a build
    needs a GPU it cannot see (environment.cuda_arch_list). So it is dropped."""
    if "torch.utils.cpp_extension" in sys.modules:
        from torch.utils import cpp_extension

        return cpp_extension
    logger, note = logging.getLogger("torch.utils.cpp_extension"), _NoCudaRuntimeNote()
    logger.addFilter(note)
    try:
        from torch.utils import cpp_extension
    finally:
        logger.removeFilter(note)
    return cpp_extension


def _launcher_mismatches(plan: BuildPlan, diagnostics: list, log: str) -> list:
    """A launcher that disagrees with its generated prototype fails to compile
    with a "conflicting declaration"; say which op, argument and types."""
    from registry import _core
    from registry.errors import Diagnostic

    excerpts = []
    for d in diagnostics[:20]:
        try:
            lines = Path(d.file).read_text(errors="replace").splitlines()
        except OSError:
            continue
        excerpts.append("\n".join(lines[max(0, d.line - 1):d.line + 5]))
    where = diagnostics[0] if diagnostics else Diagnostic(plan.manifest_file, 1, None, "error", "")
    return [where._replace(severity="error", message=m)
            for m in _core.explain_launcher_mismatch(plan.ops, log, excerpts)]


def check_launchers_at(plan: BuildPlan, path: str) -> None:
    """_check_launchers on the library at `path` in a staging folder, closed
    again: the process loads the file where it is published (kernel_load), so
    the loader's record of it (dladdr, dl_iterate_phdr: what gdb, perf and
    sanitizer reports read) names a file in the cache, not a folder renamed
    away or removed. glibc would hand the staging handle back for the
    published path (the same inode) while it stays open."""
    import _ctypes

    library = open_library(path)
    try:
        _check_launchers(plan, library)
    finally:
        _ctypes.dlclose(library._handle)


def _check_launchers(plan: BuildPlan, library) -> None:
    """Every op's launcher for every listed dtype must be exported: a missing
    one fails the build (nothing is published) rather than a later call."""
    if not plan.ops:
        return
    from registry import _core
    from registry.errors import Diagnostic

    required = plan.launchers or _core.required_launchers(plan.ops)
    exported = [s for s in required if hasattr(library, s)]
    if len(exported) == len(required):
        return
    messages = _core.missing_launchers(plan.kernel, plan.ops, exported)
    if messages:
        raise BuildError(plan.kernel, plan.describe(),
                         [Diagnostic(plan.manifest_file, 1, None, "error", m) for m in messages], "\n".join(messages))


def _libstdcxx_flags() -> list[str]:
    """torch's libstdc++ by path, so every module shares it (see
    environment.torch_libstdcxx and LINK_RECIPE)."""
    lib = environment.torch_libstdcxx()
    return [lib] if lib else []


def _ninja_deps(build_dir: Path, project_dirs: list[str]) -> list[str]:
    """The compiler's own dependency list (ninja keeps the depfiles in
    .ninja_deps), restricted to project files: system, torch and CUDA headers
    are covered by the toolchain and version inputs of the key."""
    out = subprocess.run(["ninja", "-C", str(build_dir), "-t", "deps"], capture_output=True, text=True).stdout
    prefixes = tuple(str(Path(d).resolve()) + "/" for d in project_dirs)
    deps = set()
    for line in out.splitlines():
        if line.startswith("    "):
            # Relative when under CCACHE_BASEDIR: relative to the build folder,
            # where the compiler ran, not to this process's working directory.
            path = str((build_dir / line.strip()).resolve())
            if path.startswith(prefixes):
                deps.add(path)
    return sorted(deps)
