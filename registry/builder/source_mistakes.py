"""Raw compiler, linker and loader output of common source mistakes ->
one diagnostic each that names the mistake and what to write instead.

  * two PYBIND11_MODULE blocks in a hand-written binding: g++ says
    "redefinition of 'PyObject* PyInit_kreg_<name>_cpu_<hash>()'" three
    times; say: keep exactly one block;
  * a binding whose module is not named TORCH_EXTENSION_NAME: the import says
    "dynamic module does not define module export function (PyInit_...)";
    say which macro to use;
  * one symbol defined in two sources: ld's "multiple definition of `f'";
    name the symbol and both files and lines, as the undefined-symbol message
    (link_errors.py) does for a symbol defined nowhere.

GNU ld and lld spellings are understood; objects named by index (the direct
build's 0.o, 1.o) or by source stem (torch's load()) map back to sources.
"""
from __future__ import annotations

import os
import re

_MODULE_BLOCK = re.compile(r"^\s*PYBIND11_MODULE\s*\(\s*(?P<name>\w+)\s*,", re.MULTILINE)
_REDEFINED_INIT = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:\d+:)?\s*error: redefinition of "
                             r".PyObject\* PyInit_\w+\(\).", re.MULTILINE)
_NO_EXPORT = re.compile(r"dynamic module does not define module export function \((?P<init>PyInit_\w+)\)")
# GNU ld: "b.cpp:(.text+0x0): multiple definition of `f(float)'; 1.o:a.cpp:(.text+0x0): first defined here"
_GNU_MULTIPLE = re.compile(
    r"(?P<second>\S+?):\([^)\n]*\): multiple definition of [`'\u2018](?P<symbol>[^'\u2019\n]+)['\u2019]; "
    r"(?P<first>\S+?):\([^)\n]*\): first defined here")
# lld: "duplicate symbol: f(float)\n>>> defined at a.cpp\n>>>            1.o:(f(float))\n>>> defined at b.cpp ..."
_LLD_DUPLICATE = re.compile(r"duplicate symbol: (?P<symbol>[^\n]+)\n>>> defined at (?P<first>[^\s\n]+)"
                            r"(?:\n>>>[^\n]*)*?\n>>> defined at (?P<second>[^\s\n]+)")


def diagnostics(plan, log: str) -> list:
    """The diagnostics this module recognises in a failed build's `log`."""
    found = []
    if plan.kind == "module":
        found += _module_blocks(plan, log) + _module_name(plan, log)
    if "multiple definition" in log or "duplicate symbol" in log:
        found += _duplicate_symbols(plan, log)
    return found


def _diagnostic(file: str, line: int, message: str):
    from registry.errors import Diagnostic

    return Diagnostic(file, line, None, "error", message)


def _module_blocks(plan, log: str) -> list:
    match = _REDEFINED_INIT.search(log)
    if match is None:
        return []
    file = match["file"]
    blocks = _blocks_in(file)
    earlier = ", ".join(f"line {n}" for n, _ in blocks) or "more than one place"
    return [_diagnostic(file, int(match["line"]),
                        f"the binding defines PYBIND11_MODULE more than once ({earlier}); a module has one init "
                        f"function: keep exactly one PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) block and put every "
                        f"m.def of the kernel's ops in it")]


def _module_name(plan, log: str) -> list:
    match = _NO_EXPORT.search(log)
    if match is None:
        return []
    for file in plan.sources:
        for line, name in _blocks_in(file):
            if name != "TORCH_EXTENSION_NAME":
                return [_diagnostic(file, line, (
                    f"the binding's module is named {name!r}, but the registry names each build's module itself "
                    f"and imports it as {match['init'][len('PyInit_'):]}: write PYBIND11_MODULE(TORCH_EXTENSION_NAME, "
                    f"m) (the registry defines TORCH_EXTENSION_NAME for every build)"))]
    where = plan.sources[-1] if plan.sources else plan.manifest_file
    return [_diagnostic(where, 1, "the binding defines no module the registry can import: write its block as "
                                  "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"<op>\", ...); } "
                                  "(the registry defines TORCH_EXTENSION_NAME for every build)")]


def _blocks_in(file: str) -> list[tuple[int, str]]:
    """(line, module name) of each PYBIND11_MODULE block in `file`."""
    try:
        with open(file, encoding="utf-8", errors="replace") as source:
            text = source.read()
    except OSError:
        return []
    return [(text.count("\n", 0, m.start("name")) + 1, m["name"]) for m in _MODULE_BLOCK.finditer(text)]


def _duplicate_symbols(plan, log: str) -> list:
    from registry.builder.link_errors import demangle, find_declaration

    found, seen = [], set()
    for pattern in (_GNU_MULTIPLE, _LLD_DUPLICATE):
        for match in pattern.finditer(log):
            symbol = demangle(match["symbol"].strip())
            if symbol in seen:
                continue
            seen.add(symbol)
            places = []
            for name in (match["first"], match["second"]):
                source = _source_of(plan, name)
                where = find_declaration(symbol, [source]) if source else None
                places.append(where or (source or name, 1))
            (first, first_line), (second, second_line) = places
            found.append(_diagnostic(second, second_line, (
                f"`{symbol}` is defined in two sources, {first}:{first_line} and {second}:{second_line}, and a "
                f"library holds one definition of each symbol: keep one of them; a definition in a header that "
                f"several sources include must be `inline` (or `static`, or in an unnamed namespace)")))
    return found


def _source_of(plan, name: str) -> str | None:
    """The source a linker's file or object name stands for: `a.cpp`,
    `1.o:a.cpp` or `1.o` (the direct build's objects are numbered in source
    order), `a.o` (load() names objects after their source)."""
    name = name.rsplit(":", 1)[-1]
    base = os.path.basename(name)
    for source in plan.sources:
        if os.path.basename(source) == base or os.path.abspath(source) == os.path.abspath(name):
            return source
    stem, ext = os.path.splitext(base)
    if ext == ".o":
        if stem.isdigit() and int(stem) < len(plan.sources):
            return plan.sources[int(stem)]
        for source in plan.sources:
            if os.path.splitext(os.path.basename(source))[0] == stem:
                return source
    return None
