"""What a failed build raises, whichever path ran the compiler: the
compiler's diagnostics, each undefined symbol at the kernel's declaration of
it (link_errors.py), a launcher that disagrees with its generated prototype
named by op, argument and types; and the check after a link that every
listed launcher is exported.
"""
from __future__ import annotations

import os
from pathlib import Path

from registry.builder.diagnostics import parse_diagnostics
from registry.builder.step import BuildPlan
from registry.errors import BuildError


def build_error(plan: BuildPlan, log: str, staging: Path) -> BuildError:
    """What a failed compile or link raises, whoever ran the compiler."""
    # Under CCACHE_BASEDIR the compiler names files inside the cache
    # relative to the staging folder, which is about to go: resolve now.
    diagnostics = [d if os.path.isabs(d.file) else d._replace(file=os.path.normpath(staging / d.file))
                   for d in parse_diagnostics(log)]
    if ("undefined" in log or "Unresolved extern function" in log) and plan.kind != "binding":
        diagnostics = _undefined_symbol_diagnostics(plan, log) + diagnostics
    if plan.ops:
        diagnostics = _launcher_mismatches(plan, diagnostics, log) + diagnostics
    from registry.builder import source_mistakes

    diagnostics = source_mistakes.diagnostics(plan, log) + diagnostics
    if "cannot find -l" in log:
        from registry.builder import cuda_home

        diagnostics = cuda_home.diagnostics(log, plan.manifest_file or (plan.sources or ["<link>"])[0]) + diagnostics
    return BuildError(plan.kernel, plan.describe(), diagnostics, log)


def _undefined_symbol_diagnostics(plan: BuildPlan, log: str) -> list:
    """Each undefined symbol, at the kernel's declaration of it (link_errors.py)."""
    from registry import _core
    from registry.builder import link_errors

    closure = _core.scan_include_closure(plan.sources, plan.include_paths)
    headers = [f for f in closure.files if f not in plan.sources]
    return link_errors.diagnostics(log, plan.sources, headers, plan.kernel, f"[{plan.backend}]")


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
    """Every op's launcher for every listed dtype must be exported by the
    library at `path` (in a staging folder): a missing one fails the build
    (nothing is published) rather than a later call.

    Read from the file (builder/elf.py), never loaded: opening a CUDA library
    registers its device code with the CUDA runtime, and once it was closed
    again the published copy's launches failed in that process ("device
    kernel image is invalid"). The process loads only the published file
    (registry/load.py), so the loader's record of it (what gdb, perf and
    sanitizer reports read) names a file in the cache."""
    if not plan.ops:
        return
    from registry import _core
    from registry.builder import elf
    from registry.errors import Diagnostic

    required = plan.launchers or _core.required_launchers(plan.ops)
    exported = elf.exported_symbols(path)
    if exported is None:
        raise BuildError(plan.kernel, plan.describe(), [], f"the built library {path} is not a 64-bit ELF shared "
                         "library the registry can read; rebuild with get(name, rebuild=True)")
    found = [s for s in required if s in exported]
    if len(found) == len(required):
        return
    messages = _core.missing_launchers(plan.kernel, plan.ops, found)
    if messages:
        raise BuildError(plan.kernel, plan.describe(),
                         [Diagnostic(plan.manifest_file, 1, None, "error", m) for m in messages], "\n".join(messages))
