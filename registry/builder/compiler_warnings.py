"""What a compiler warned during a build that succeeded, shown to the user.

A build's output is read only when it fails (failure.py); a successful one
used to say nothing, so a kernel that builds but is slow for a reason the
compiler knew (ptxas: "Registers are spilled to local memory", C7510
"wgmma ... serialized") looked fine. Each build path keeps its compilers'
output (direct.py, torch_extension.py, device/cubin_build.py), this module
picks the warnings out of it, and resolve.py shows them once, as a
CompilerWarning, after the build that printed them: a cache hit compiles
nothing and warns nothing.
"""
from __future__ import annotations

import os
import re
import sys
import warnings

# "ptxas warning : ...", "nvcc warning : ...", "file.cu(12): warning #177-D: ...",
# "file.cpp:3:2: warning: ...": a word `warning` directly before its colon (or
# nvcc's "#<number>-D"), so a command line's -Wall or -warn-spills never matches.
_WARNING = re.compile(r"(^|[\s:)])warning( #\d+(-D)?)?\s*:", re.IGNORECASE)
_NINJA_STEP = re.compile(r"^\[\d+/\d+\] ")
_MAX_LINES = 40  # a header that warns in every unit must not bury the cell
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # registry/


def warning_lines(output: str) -> list[str]:
    """Each warning of `output` with the lines that show where (the source
    line and its caret, indented, that nvcc and gcc print below it), once."""
    found: list[str] = []
    seen: set[str] = set()
    current: list[str] | None = None
    for line in output.splitlines():
        if _WARNING.search(line) and not _NINJA_STEP.match(line):
            current = [line.rstrip()]
            key = line.strip()
            if key not in seen:
                seen.add(key)
                found.extend(current)
            else:
                current = None
            continue
        if current is not None and line.startswith((" ", "\t")) and line.strip():
            found.append(line.rstrip())
            continue
        current = None
    return found


def show(kernel: str, warned: list[tuple[str, list[str]]], key: str = "") -> None:
    """One CompilerWarning for a get's builds: (what was built, its warning
    lines) each. The key is in the text: Python shows a repeated message once
    per place, and the next build that warns the same must still be shown."""
    warned = [(what, lines) for what, lines in warned if lines]
    if not warned:
        return
    from registry.errors import CompilerWarning

    parts = []
    for what, lines in warned:
        shown = lines[:_MAX_LINES]
        more = f"\n  ... {len(lines) - len(shown)} more lines" if len(lines) > len(shown) else ""
        parts.append(f"{what}:\n" + "\n".join("  " + line for line in shown) + more)
    build = f" (build {key[:12]})" if key else ""
    warnings.warn(CompilerWarning(f"kernel {kernel!r} built with compiler warnings{build}; "
                                  + "\n".join(parts)), stacklevel=_caller_level())


def _caller_level() -> int:
    """The stacklevel of the first frame outside the registry (the user's
    get, from whichever entry point), as seen from show()."""
    frame, level = sys._getframe(1), 1  # show()'s own frame is level 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
