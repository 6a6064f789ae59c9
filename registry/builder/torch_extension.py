"""One compile, through torch.utils.cpp_extension.load, into a staging folder.

What is built here (see ARCHITECTURE.md; the shared binding, on torch's
stable ABI, is built by direct.py):
  kernel-lib  the kernel's own sources, no torch header, as a shared library
              named kreg_<kernel>_<backend>: a kernel edit recompiles only this
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
import threading
import time
from pathlib import Path

from registry import knobs
from registry.builder import arch_check, compiler_warnings
from registry.builder.failure import build_error, check_launchers_at
from registry.builder.progress import build_progress
from registry.builder.step import BuildPlan, BuildResult, builds_run, sanitized, torch_libstdcxx_flags


def build(plan: BuildPlan, staging: Path) -> BuildResult:
    cpp_extension = _import_cpp_extension()

    builds_run.append((plan.kernel, plan.kind))

    # load() keeps an in-memory version per name and appends _v<N> to it when
    # its inputs change; our names are chosen per build, so reset it.
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(plan.module_name, None)
    start = time.perf_counter()
    _keep_ninja_output(cpp_extension)
    with _kept_lock:
        _kept[str(staging)] = ""
    try:
        # A progress bar after 0.5 s; on any exception (Ctrl-C included) it also
        # stops the compilers still running in the staging folder.
        with build_progress(plan.kernel, plan.describe(), plan.estimate_s, build_dir=staging):
            options = dict(name=plan.module_name, sources=plan.sources, extra_cflags=plan.cflags,
                           extra_cuda_cflags=plan.cuda_cflags, extra_ldflags=plan.ldflags + torch_libstdcxx_flags(),
                           extra_include_paths=plan.include_paths, build_directory=str(staging),
                           verbose=knobs.verbose(), with_cuda=plan.with_cuda)
            if plan.kind == "kernel-lib":
                # Built, not loaded: load() would dlopen it here, in the staging
                # folder, for the life of the process (see check_launchers_at);
                # registry/load.py opens the published file.
                cpp_extension._write_ninja_file_and_build_library(
                    **options, extra_sycl_cflags=[], with_sycl=False, is_standalone=False)
                loaded = None
            else:
                loaded = cpp_extension.load(**options, is_python_module=plan.is_python_module)
    except (RuntimeError, OSError, ImportError) as error:
        raise build_error(plan, _error_text(error), staging) from None
    finally:
        with _kept_lock:
            output = _kept.pop(str(staging), "")
    seconds = time.perf_counter() - start
    if plan.with_cuda and plan.kind in ("kernel-lib", "module"):
        arch_check.check_image(plan.kernel, (staging / plan.artifact).read_bytes(), arch=plan.cuda_arch or "",
                               manifest_file=plan.manifest_file, what=plan.describe())
    deps = _ninja_deps(staging, plan.project_dirs)
    for obj in staging.glob("*.o"):
        obj.unlink()
    if plan.kind == "kernel-lib" and not sanitized(plan):  # a checked build: only its worker opens it
        # Its exports read from the file: never opened in the staging folder.
        check_launchers_at(plan, str(staging / plan.artifact))
    return BuildResult(staging, plan.artifact, deps, seconds, loaded, compiler_warnings.warning_lines(output))


# The output of each ninja run in a build folder of ours, by folder: load()
# shows it only when the build fails (its _run_ninja_build captures and drops
# it), and a build that succeeds may have warned (compiler_warnings.py).
_kept: dict[str, str] = {}
_kept_lock = threading.Lock()


def _keep_ninja_output(cpp_extension) -> None:
    """Replaces load()'s ninja step, once, with one that runs the same command
    and fails the same way (a RuntimeError holding the output, which
    failure.py reads) and keeps the output of a folder registered in _kept.
    Builds of other folders (anyone else's load()), and verbose builds (whose
    output streams to the terminal), go to torch's own."""
    with _kept_lock:
        original = cpp_extension._run_ninja_build
        if not getattr(original, "keeps_output", False):
            cpp_extension._run_ninja_build = _keeping_output(cpp_extension, original)


def _keeping_output(cpp_extension, original):
    def run_ninja_build(build_directory: str, verbose: bool, error_prefix: str) -> None:
        with _kept_lock:
            ours = str(build_directory) in _kept
        if not ours or verbose:
            return original(build_directory, verbose, error_prefix)
        command = ["ninja", "-v"]
        workers = cpp_extension._get_num_workers(verbose) if hasattr(cpp_extension, "_get_num_workers") else None
        if workers is not None:
            command += ["-j", str(workers)]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=build_directory,
                              env=os.environ.copy(), check=False)
        output = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            raise RuntimeError(f"{error_prefix}: {output}")
        with _kept_lock:
            _kept[str(build_directory)] = output

    run_ninja_build.keeps_output = True
    return run_ninja_build


def _error_text(error: BaseException) -> str:
    """The error and what caused it: load() reports a library that does not
    load as "Could not load this library: <path>" and keeps the reason (an
    undefined symbol, say) only in the exception it chains."""
    parts, cause = [str(error)], error.__cause__ or error.__context__
    while cause is not None and len(parts) < 5:
        parts.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    return "\n".join(parts)


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
