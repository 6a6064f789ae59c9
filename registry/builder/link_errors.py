"""Undefined symbols -> a diagnostic at the declaration nobody defined.

Kernel libraries link with `-z defs`, so a function that is declared and
called but defined in no source fails the link (it used to fail the first
dlopen, naming a staging folder already gone). The linker names the symbol;
this finds where the kernel declares it, so the error points at a line:

    include/helper.h:3: error: undefined symbol `helper(float, float)`: declared here,
    but no source of the kernel library defines it ...

GNU ld ("undefined reference to `helper(float, float)'"), lld ("undefined
symbol: helper(float, float)"), dlopen ("undefined symbol: _Z6helperff") and
ptxas for a __device__ function ("Unresolved extern function '_Z6helperff'",
from nvcc and NVRTC alike; nvJitLink's split link: "Undefined reference to
'_Z6helperff'") are understood; mangled names are demangled with
c++filt.

A declaration and a definition whose parameter types differ are two
functions to C++: the call links against the declaration it saw, and the
definition defines another symbol. The kernel's files are searched for every
function of the symbol's name, their parameter types compared with the
symbol's, and the message names the declaration the compiler saw, the
definition with another signature, and which parameters differ:

    axpy_cpu.cpp:6: error: undefined symbol `helper(float, float)`: declared here, but the
    definition at helper.cpp:1 has another signature, `helper(double, float)`: parameter 1 is
    `double` there, `float` here ...
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from registry.errors import Diagnostic

_REFERENCE = re.compile(r"undefined reference to [`'\u2018](?P<symbol>[^'\u2019\n]+)['\u2019]")
_SYMBOL = re.compile(r"undefined symbol: (?P<symbol>[^\n]+)")  # to the end of the line
# ptxas; nvJitLink when its link is split over threads (-split-compile-extended)
_DEVICE = re.compile(r"(?:Unresolved extern function|Undefined reference to) '(?P<symbol>[^'\n]+)'")


def device_symbols(log: str) -> list[str]:
    """The __device__ functions ptxas could not resolve, demangled."""
    return list(dict.fromkeys(demangle(m["symbol"].strip()) for m in _DEVICE.finditer(log)))


def undefined_symbols(log: str) -> list[str]:
    """The undefined symbols a link or load log names, demangled, in order."""
    found: list[str] = []
    for pattern in (_REFERENCE, _SYMBOL, _DEVICE):
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
    for path, lines in _read(files):
        for number, _ in _declarations(base_name(symbol), lines):
            return path, number
    return None


@dataclass(frozen=True)
class Function:
    """One declaration or definition of a function in a kernel's file."""
    file: str
    line: int
    parameters: list[str]  # types, spelled as c++filt spells them (`float const*`)
    is_definition: bool


def find_functions(symbol: str, files: list[str]) -> list[Function]:
    """Every declaration and definition of `symbol`'s name in `files`, with
    its parameter types (those of a variable, no `(`, are left out)."""
    found = []
    for path, lines in _read(files):
        for number, column in _declarations(base_name(symbol), lines):
            text = "\n".join(lines[number - 1:number + 20])[column:]  # a parameter list may span lines
            opened = text.find("(")
            if opened < 0 or text[:opened].strip() not in ("", base_name(symbol)):
                continue
            inside, rest = _balanced(text[opened:])
            if inside is None:
                continue
            found.append(Function(path, number, [_parameter_type(p) for p in _split_top_level(inside)],
                                  re.match(r"[\w\s&]*(->[^{;]*)?\{", rest) is not None))
    return found


def parameter_types(symbol: str) -> list[str]:
    """`helper(float const*, int) const` -> ["float const*", "int"]."""
    opened = symbol.find("(")
    inside, _ = _balanced(symbol[opened:]) if opened >= 0 else (None, "")
    return [_normal_type(p) for p in _split_top_level(inside or "")]


def differences(declared: list[str], defined: list[str]) -> list[tuple[int, str | None, str | None]]:
    """(1-based position, declared type, defined type) of each parameter that
    differs; None where one list is shorter."""
    out = []
    for i in range(max(len(declared), len(defined))):
        a = declared[i] if i < len(declared) else None
        b = defined[i] if i < len(defined) else None
        if a != b:
            out.append((i + 1, a, b))
    return out


def diagnostics(log: str, sources: list[str], headers: list[str], kernel: str, section: str,
                linked: bool = False) -> list[Diagnostic]:
    """linked: the device code is linked from units ([cuda] link_sources).
    One diagnostic per undefined symbol the log names: at the declaration
    with the symbol's parameter types when one is found in the kernel's files
    (headers first), naming a definition with another signature when there
    is one; else at the first declaration of the name, else at the first
    source."""
    out = []
    device = device_symbols(log)
    for symbol in undefined_symbols(log):
        wanted = parameter_types(symbol)
        functions = find_functions(symbol, headers + sources)
        seen = next((f for f in functions if f.parameters == wanted and not f.is_definition), None)
        other = next((f for f in functions if f.is_definition and f.parameters != wanted), None)
        if seen is not None and other is not None:
            out.append(Diagnostic(seen.file, seen.line, None, "error", _mismatch_message(
                symbol, wanted, other, kernel)))
            continue
        where = (seen.file, seen.line) if seen else find_declaration(symbol, headers + sources)
        file, line = where if where else (sources[0] if sources else "<link>", 1)
        if symbol in device:
            out.append(Diagnostic(file, line, None, "error", _device_message(symbol, bool(where), kernel, linked)))
            continue
        out.append(Diagnostic(
            file, line, None, "error",
            f"undefined symbol `{symbol}`: " + ("declared here, but " if where else "")
            + f"no source of kernel {kernel!r} defines it. Define it in one of the {section} sources, "
            f"or add the file that defines it to {section}.sources in kernel.toml"))
    return out


def _device_message(symbol: str, declared: bool, kernel: str, linked: bool = False) -> str:
    # Device code is compiled whole-program per translation unit (no -rdc):
    # a definition in another .cu file is not seen by the caller's, unless the
    # file is one of the [cuda] link_sources, which are linked (lto_link.py).
    start = (f"undefined __device__ function `{symbol}`: " + ("declared here, but " if declared else "")
             + f"the device code of kernel {kernel!r} that calls it does not define it. ")
    if linked:
        return start + ("Define it (with this signature, not static, outside an anonymous namespace) in one of "
                        "the [cuda] link_sources, which are linked with the other device sources, or in the "
                        "same translation unit as its callers")
    return start + ("Define it in the same translation unit as its callers: in the header, as `__device__ "
                    "inline`, or in the .cu file that calls it (a definition in another .cu file would need "
                    "relocatable device code, nvcc -rdc=true, which these builds do not use; or list that "
                    "file in [cuda] link_sources)")


def _mismatch_message(symbol: str, wanted: list[str], other: Function, kernel: str) -> str:
    name = base_name(symbol)
    parts = []
    for position, here, there in differences(wanted, other.parameters):
        if here is None:
            parts.append(f"parameter {position} (`{there}`) is there only")
        elif there is None:
            parts.append(f"parameter {position} (`{here}`) is here only")
        else:
            parts.append(f"parameter {position} is `{there}` there, `{here}` here")
    return (f"undefined symbol `{symbol}`: declared here, and called with this signature, but the "
            f"definition at {other.file}:{other.line} has another signature, "
            f"`{name}({', '.join(other.parameters)})`: {'; '.join(parts)}. C++ treats the two as "
            f"different functions, so kernel {kernel!r} defines none with the declared one. "
            f"Make the definition's parameter types match the declaration (or the declaration "
            f"and its callers match the definition)")


def _read(files: list[str]):
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as source:
                yield path, source.read().splitlines()
        except OSError:
            continue


def _declarations(name: str, lines: list[str]):
    """(line, column of the name) of each declaration of `name`: the name
    right after a type, not after `=`, `(`, `,` or `return` (calls)."""
    use = re.compile(rf"(?<![\w.>:])(?:\w+::)*{re.escape(name)}\s*[(\[;=]")
    for number, line in enumerate(lines, start=1):
        code = line.split("//", 1)[0]
        for m in use.finditer(code):
            before = code[:m.start()].rstrip()
            if re.search(r"[\w*&>]$", before) and not re.search(r"(\breturn|[=(,]\s*\w*)$", before):
                yield number, m.start()
                break


def _balanced(text: str) -> tuple[str | None, str]:
    """`(a, (b)) rest` -> ("a, (b)", " rest"); None when it never closes."""
    depth = 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0:
            return text[1:i], text[i + 1:]
    return None, ""


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"(": 1, "<": 1, "[": 1, ")": -1, ">": -1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    parts = [p.strip() for p in parts]
    return [] if parts in ([""], ["void"]) else parts


_TYPE_WORDS = {"int", "float", "double", "char", "long", "short", "unsigned", "signed", "bool",
               "void", "auto", "const", "volatile", "wchar_t", "char16_t", "char32_t"}


def _parameter_type(parameter: str) -> str:
    """`const float* x = nullptr` -> `float const*`: the default and the name dropped."""
    text = re.sub(r"/\*.*?\*/", " ", parameter.split("=", 1)[0]).strip()
    m = re.match(r"^(?P<type>.*?[>*&\s])(?P<name>[A-Za-z_]\w*)\s*(?P<array>(\[[^\]]*\]\s*)*)$", text)
    if m and m["name"] not in _TYPE_WORDS and set(m["type"].split()) - {"const", "volatile"} - {""}:
        text = m["type"] + ("*" if m["array"] else "")
    return _normal_type(text)


def _normal_type(text: str) -> str:
    """One spelling per type, c++filt's: `const float *` -> `float const*`."""
    text = re.sub(r"\s+", " ", text.strip())
    text = re.sub(r"\s*([*&])", r"\1", text)
    m = re.match(r"^const (?P<base>[\w:<>, ]+?)(?P<rest>[*&].*)?$", text)
    if m:
        text = f"{m['base']} const{m['rest'] or ''}"
    # A top-level const is no part of a function's type (`f(const float)` is `f(float)`).
    return re.sub(r"\s*\b(const|volatile)$", "", text)
