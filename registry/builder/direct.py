"""Torch-free kernel libraries, and the shared binding on torch's stable ABI
(recipe.binding_plan), built by the registry's own compiler call.

A kernel library includes no torch header and exports C launchers, so it
needs none of what cpp_extension.load() brings (torch's include paths, a
ninja file, libtorch on the link line, a Python import). Used for CPU kernel
libraries and for the host launchers of NVRTC-built device code:

  one source     c++ <flags> -MMD src.cpp -shared -o lib.so   (one step, no ccache)
  several, or    c++ -c each (through ccache, side by side), then one link
  remote storage

CXX is the ccache wrapper when ccache is on (ccache.compiler_environment
sets it for every build). ccache cannot cache a step that links, and
without remote storage it is a local cache only, which the registry's own
content-keyed cache covers for a one-source library (a revert, a second
cache folder aside): so one source is compiled and linked in one step by the
compiler itself, unless a remote could serve or share the compile.

Linked lean where it fits: most kernel libraries call nothing of the C++
runtime, and reading libstdc++ is ~13 ms of GNU ld's ~25 ms here, a tenth of
an edit. So when the library this build replaces needed nothing beyond libc,
libm and libgcc (_needs_only_c_runtime: its DT_NEEDED entries), the step
links only those (-nodefaultlibs). An edit that starts using libstdc++ (or
OpenMP, ...) then fails that link under -z defs with an undefined reference,
and the step runs again with the usual link: never a library that loads
wrong, at worst one compile more, once.

Diagnostics read as load()'s do: file:line with the offending line marked.
The key of such a library leaves out torch's and Python's versions
(keys.kernel_lib_key), and so does the binding's (keys.binding_key): upgrading
torch rebuilds nothing.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from registry import command_lines
from registry.builder import arch_check, ccache, compiler_warnings, elf, launch_runtime, nvcc_launchers
from registry.builder.failure import build_error, check_launchers_at
from registry.builder.progress import build_progress, wait_for_build
from registry.builder.step import BuildResult, builds_run, sanitized, torch_libstdcxx_flags

def build(plan, staging: Path):
    builds_run.append((plan.kernel, plan.kind))
    cxx = os.environ.get("CXX") or "c++"
    real_cxx = ccache.unwrapped(cxx)  # what links: ccache caches no step that links
    flags = command_lines.direct_flags(plan.cflags, plan.include_paths)
    out = staging / plan.artifact
    start = time.perf_counter()
    sources, linked, outputs = plan.compiled_sources(), [], []
    if plan.links_launch_runtime():
        runtime, log = launch_runtime.ensure_object(real_cxx)
        if runtime is None:
            raise build_error(plan, log, staging)
        linked.append(str(runtime))
    if plan.one_step():
        # The progress timer starts only if the build outlasts SHOW_AFTER_S (progress.wait_for_build).
        def step(link_flags: list[str], check: bool = True):
            return _run(command_lines.direct_one_step(real_cxx, flags, sources[0], linked, link_flags, str(out)),
                        plan, staging, progress=True, check=check)

        if _needs_only_c_runtime(plan.previous_library):
            returncode, log = step(_lean_link_flags(plan), check=False)
            if returncode != 0 and not _undefined_references_only(log):
                raise build_error(plan, log, staging)
            if returncode != 0:
                outputs.append(step(_link_flags(plan, real_cxx)))
            else:
                outputs.append(log)
        else:
            outputs.append(step(_link_flags(plan, real_cxx)))
    else:
        with build_progress(plan.kernel, plan.describe(), plan.estimate_s, build_dir=staging):
            objects = [f"{i}.o" for i in range(len(sources))]
            with ThreadPoolExecutor(max_workers=min(len(sources), os.cpu_count() or 1)) as pool:
                outputs += pool.map(lambda i: _run(_compile_command(plan, cxx, real_cxx, flags, sources[i], i),
                                                   plan, staging), range(len(objects)))
            runtime_libs = nvcc_launchers.runtime_link_flags() if plan.launcher_arch else []
            outputs.append(_run(command_lines.direct_link(real_cxx, objects, linked, _link_flags(plan, real_cxx),
                                                          runtime_libs, str(out)), plan, staging))
    seconds = time.perf_counter() - start
    if plan.launcher_arch:  # nvcc's device pass over the launchers (arch_check.py)
        arch_check.check_image(plan.kernel, out.read_bytes(), arch=plan.launcher_arch,
                               manifest_file=plan.manifest_file, what="the launchers (nvcc)")
    deps = _depfile_deps(staging, plan.project_dirs)
    for leftover in [*staging.glob("*.o"), *staging.glob("*.d")]:
        leftover.unlink()
    if not sanitized(plan):  # a checked build: only a worker with its sanitizer runtime opens it
        check_launchers_at(plan, str(out))  # read, not loaded: registry/load.py opens the published file
    # The shared binding's warnings would be torch's headers', not the kernel's.
    said = compiler_warnings.warning_lines("\n".join(outputs)) if plan.kind != "binding" else []
    return BuildResult(staging, plan.artifact, deps, seconds, None, said)


def _compile_command(plan, cxx: str, real_cxx: str, flags: list[str], source: str, i: int) -> list[str]:
    if plan.launcher_arch:
        return nvcc_launchers.compile_command(plan, source, f"{i}.o", f"{i}.d", flags, real_cxx)
    return command_lines.direct_compile(cxx, flags, source, f"{i}.o", f"{i}.d")


def _link_flags(plan, cxx: str) -> list[str]:
    # The shared binding's Python symbols come from the interpreter that loads
    # it (an extension links no libpython); everything else must resolve here.
    return command_lines.link_flags(plan.ldflags, _libstdcxx_flags(cxx), allow_undefined=plan.kind == "binding")


def _lean_link_flags(plan) -> list[str]:
    return command_lines.lean_link_flags(plan.ldflags)


# What a lean link provides (and ld.so itself).
_C_RUNTIME = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def _needs_only_c_runtime(library: str | None) -> bool:
    """Whether `library` (a kernel library built here) needs no library a lean
    link leaves out. Linked as needed (the toolchain's default), a library
    records libstdc++, libgomp, ... only if it uses them; a toolchain that
    records them anyway simply never links lean."""
    needed = elf.needed_libraries(library) if library is not None else None
    return needed is not None and set(needed) <= _C_RUNTIME


def _undefined_references_only(log: str) -> bool:
    """The lean step compiled but did not link: the linker names undefined
    references (GNU ld) or symbols (lld, mold), and the compiler reported no
    error of its own (file:line:col)."""
    return (re.search(r"undefined (reference to|symbol)", log) is not None
            and re.search(r":\d+:\d+: (fatal )?error:", log) is None)


def _libstdcxx_flags(cxx: str) -> list[str]:
    """torch's libstdc++ by path (step.torch_libstdcxx_flags), unless it is the
    very file the compiler links for -lstdc++ anyway: naming it twice makes
    GNU ld read it twice, ~10 ms of a ~0.1 s edit. Either way the library
    needs the same libstdc++.so.6, so the key does not change."""
    torch_lib = torch_libstdcxx_flags()
    if torch_lib and _compiler_libstdcxx(*_stat_of(cxx)) == os.path.realpath(torch_lib[0]):
        return []
    return torch_lib


def _stat_of(cxx: str) -> tuple:
    path = cxx if "/" in cxx else (shutil.which(cxx) or cxx)
    try:
        st = os.stat(path)
    except OSError:
        return path, None
    return path, (st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _compiler_libstdcxx(cxx: str, _stat) -> str | None:
    """The real path of the libstdc++.so `cxx` links for -lstdc++, or None
    where it names none (asked once per compiler binary: ~5 ms)."""
    def find(name: str) -> str | None:
        done = subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True, check=False)
        found = done.stdout.strip()
        return found if done.returncode == 0 and os.path.isabs(found) and os.path.exists(found) else None

    shared, archive = find("libstdc++.so"), find("libstdc++.a")
    if shared is None:
        return None  # a bare name back: the compiler has no such file
    if archive is not None and os.path.dirname(archive) != os.path.dirname(shared):
        # A toolchain whose own folder holds only the archive (searched first):
        # -lstdc++ links it statically, whatever -print-file-name says of the .so.
        return None
    return os.path.realpath(shared)


def _run(command: list[str], plan, staging: Path, progress: bool = False, check: bool = True):
    """progress: show build progress for this command (the one-step build);
    a multi-step build shows it around all its steps. Returns the command and
    its output (warnings: compiler_warnings.py); check=False: (exit status,
    that) instead of raising BuildError."""
    # cwd = the staging folder: an interrupted build's compilers are found there
    # (progress.py), and relative names in diagnostics resolve against it.
    if progress:
        process = subprocess.Popen(command, cwd=staging, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = wait_for_build(process, plan.kernel, plan.describe(), plan.estimate_s, build_dir=staging)
        returncode = process.returncode
    else:
        done = subprocess.run(command, cwd=staging, capture_output=True, text=True)
        stdout, stderr, returncode = done.stdout, done.stderr, done.returncode
    log = " ".join(command) + "\n" + stdout + stderr
    if not check:
        return returncode, log
    if returncode != 0:
        raise build_error(plan, log, staging)
    return log


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
