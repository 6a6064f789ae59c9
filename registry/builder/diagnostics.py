"""Compiler output -> Diagnostic records with file and line.

g++ and clang write `file:line:col: error: message`; nvcc (through cudafe)
writes `file(line): error: message`. Both, and the `error:` lines of the
linker, end up here so a failed build can point at the line to fix.
"""
from __future__ import annotations

import re

from registry.errors import Diagnostic

_GCC = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
    r"(?P<sev>fatal error|error|warning)(?:\s*\[[^\]]*\])?:\s*(?P<msg>.*)$",
    re.MULTILINE,
)
_NVCC = re.compile(
    r"^(?P<file>[^\s(][^(\n]*)\((?P<line>\d+)\):\s*(?P<sev>error|warning)[^:\n]*:\s*(?P<msg>.*)$",
    re.MULTILINE,
)


def parse_diagnostics(log: str, errors_only: bool = True) -> list[Diagnostic]:
    found: list[tuple[int, Diagnostic]] = []
    seen: set[tuple[str, int, str]] = set()
    for pattern in (_GCC, _NVCC):
        for m in pattern.finditer(log):
            severity = "error" if "error" in m["sev"] else "warning"
            if errors_only and severity != "error":
                continue
            col = m.groupdict().get("col")
            d = Diagnostic(m["file"].strip(), int(m["line"]), int(col) if col else None, severity, m["msg"].strip())
            if (d.file, d.line, d.message) not in seen:
                seen.add((d.file, d.line, d.message))
                found.append((m.start(), d))
    return [d for _, d in sorted(found, key=lambda item: item[0])]
