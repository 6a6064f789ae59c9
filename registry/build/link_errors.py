"""Undefined symbols -> a diagnostic at the declaration nobody defined.

Kernel libraries link with `-z defs`, so a function that is declared and
called but defined in no source fails the link (it used to fail the first
dlopen, naming a staging folder already gone). The linker names the symbol;
this finds where the kernel declares it, so the error points at a line:

    include/helper.h:3: error: undefined symbol `helper(float, float)`: declared here,
    but no source of the kernel library defines it ...

GNU ld ("undefined reference to `helper(float, float)'"), lld ("undefined
symbol: helper(float, float)") and dlopen ("undefined symbol: _Z6helperff")
are understood; mangled names are demangled with c++filt.
"""
from __future__ import annotations

import re
import shutil
import subprocess

from registry.errors import Diagnostic

_REFERENCE = re.compile(r"undefined reference to [`'\u2018](?P<symbol>[^'\u2019\n]+)['\u2019]")
_SYMBOL = re.compile(r"undefined symbol: (?P<symbol>[^\n]+)")  # to the end of the line


def undefined_symbols(log: str) -> list[str]:
    """The undefined symbols a link or load log names, demangled, in order."""
    found: list[str] = []
    for pattern in (_REFERENCE, _SYMBOL):
        for m in pattern.finditer(log):
            symbol = demangle(m["symbol"].strip())
            if symbol not in found:
                found.append(symbol)
    return found


def demangle(symbol: str) -> str:
    if not symbol.startswith("_Z") or shutil.which("c++filt") is None:
        return symbol
    done = subprocess.run(["c++filt", symbol], capture_output=True, text=True, check=False)
    return done.stdout.strip() or symbol if done.returncode == 0 else symbol


def base_name(symbol: str) -> str:
    """`ns::helper<int>(float, float) const` -> `helper`."""
    name = symbol.split("(", 1)[0].strip()
    while name.endswith(">"):  # template arguments
        depth, cut = 0, len(name)
        for i in range(len(name) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(name[i], 0)
            if depth == 0:
                cut = i
                break
        name = name[:cut].rstrip()
    return name.rsplit("::", 1)[-1].split()[-1] if name else symbol


def find_declaration(symbol: str, files: list[str]) -> tuple[str, int] | None:
    """(file, line) of the first declaration of `symbol`'s name in `files`:
    the name right after a type (`float helper(`, `int* helper(`, `extern
    float helper`), not after `=`, `(`, `,` or `return` (calls)."""
    name = re.escape(base_name(symbol))
    use = re.compile(rf"(?<![\w.>:])(?:\w+::)*{name}\s*[(\[;=]")
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as source:
                lines = source.read().splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, start=1):
            code = line.split("//", 1)[0]
            for m in use.finditer(code):
                before = code[:m.start()].rstrip()
                if re.search(r"[\w*&>]$", before) and not re.search(r"(\breturn|[=(,]\s*\w*)$", before):
                    return path, number
    return None


def diagnostics(log: str, sources: list[str], headers: list[str], kernel: str, section: str) -> list[Diagnostic]:
    """One diagnostic per undefined symbol the log names: at its declaration
    when one is found in the kernel's files (headers first), else at the
    first source."""
    out = []
    for symbol in undefined_symbols(log):
        where = find_declaration(symbol, headers + sources)
        file, line = where if where else (sources[0] if sources else "<link>", 1)
        out.append(Diagnostic(
            file, line, None, "error",
            f"undefined symbol `{symbol}`: " + ("declared here, but " if where else "")
            + f"no source of kernel {kernel!r} defines it. Define it in one of the {section} sources, "
            f"or add the file that defines it to {section}.sources in kernel.toml"))
    return out
