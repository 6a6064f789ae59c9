"""Torch-free kernel libraries built by the registry's own compiler call.

A kernel library includes no torch header and exports C launchers, so it
needs none of what cpp_extension.load() brings (torch's include paths, a
ninja file, libtorch on the link line, a Python import). Used for CPU kernel
libraries and for the host launchers of NVRTC-built device code:

  one source     c++ <flags> -MMD src.cpp -shared -o lib.so   (one step)
  several        c++ -c each (through ccache, side by side), then one link

CXX is the ccache wrapper when ccache is on (ccache.compiler_environment
sets it for every build). Diagnostics read as load()'s do: file:line with
the offending line marked. The key of such a library leaves out torch's and
Python's versions (keys.kernel_lib_key), so upgrading torch rebuilds only the
bindings.
"""
from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from registry import builder
from registry.environment import DIRECT_RECIPE  # noqa: F401  (beside the other recipes: get reads it without this module)
_COMPILE = ["-std=c++20", "-fPIC"]


def build(plan, staging: Path):
    from registry.launchers import open_library
    from registry.progress import build_progress

    builder.builds_run.append((plan.kernel, plan.kind))
    cxx = os.environ.get("CXX") or "c++"
    flags = [*_COMPILE, *plan.cflags, *(f"-I{p}" for p in plan.include_paths)]
    link = ["-shared", *plan.ldflags, "-Wl,--no-undefined", *builder._libstdcxx_flags()]
    out = staging / plan.artifact
    start = time.perf_counter()
    with build_progress(plan.kernel, plan.describe(), plan.estimate_s, build_dir=staging):
        # One compile-and-link step is the fastest edit, but ccache cannot
        # cache a step that links: through ccache (a team's remote storage
        # included), every source is compiled on its own and then linked.
        if len(plan.sources) == 1 and not _through_ccache():
            _run([cxx, *flags, "-MMD", "-MF", "0.d", plan.sources[0], *link, "-o", str(out)], plan, staging)
        else:
            objects = [f"{i}.o" for i in range(len(plan.sources))]
            with ThreadPoolExecutor(max_workers=min(len(plan.sources), os.cpu_count() or 1)) as pool:
                list(pool.map(lambda i: _run([cxx, *flags, "-MMD", "-MF", f"{i}.d", "-c", plan.sources[i],
                                              "-o", objects[i]], plan, staging), range(len(objects))))
            _run([cxx, *objects, *link, "-o", str(out)], plan, staging)
    seconds = time.perf_counter() - start
    deps = _depfile_deps(staging, plan.project_dirs)
    for leftover in [*staging.glob("*.o"), *staging.glob("*.d")]:
        leftover.unlink()
    library = open_library(str(out))
    builder._check_launchers(plan, library)
    return builder.BuildResult(staging, plan.artifact, deps, seconds, library)


def _through_ccache() -> bool:
    from registry import ccache

    return ccache.ccache_executable() is not None


def _run(command: list[str], plan, staging: Path) -> None:
    # cwd = the staging folder: an interrupted build's compilers are found there
    # (progress.py), and relative names in diagnostics resolve against it.
    done = subprocess.run(command, cwd=staging, capture_output=True, text=True)
    if done.returncode != 0:
        raise builder.build_error(plan, " ".join(command) + "\n" + done.stdout + done.stderr, staging)


def _depfile_deps(staging: Path, project_dirs: list[str]) -> list[str]:
    """The compiler's dependency lists (-MMD), restricted to project files."""
    prefixes = tuple(str(Path(d).resolve()) + "/" for d in project_dirs)
    deps = set()
    for depfile in staging.glob("*.d"):
        text = depfile.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            _, _, files = line.partition(": ")
            for name in files.split():
                path = str((staging / name).resolve())
                if path.startswith(prefixes):
                    deps.add(path)
    return sorted(deps)
