"""The shared binding is built on torch's stable ABI and Python's limited API
(core/stable_binding_text.h), so one file serves every torch from the target
on and every Python from 3.10 on. What it asks the loader for says whether
that holds: every undefined dynamic symbol must be one of torch's stable C
shims, a symbol of Python's limited API, of the C and C++ runtimes, or of
CUDA's runtime or driver; never a c10::/at::/torch:: C++ symbol (those change
with every torch) nor one of libtorch_python's.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import registry
from registry.state import STATE

pytestmark = [pytest.mark.usefixtures("cache_root"),
              pytest.mark.skipif(shutil.which("nm") is None or shutil.which("c++filt") is None,
                                 reason="needs binutils' nm and c++filt")]

# torch's stable C shims (torch/csrc/stable/c/shim.h, aoti_torch/c/shim.h).
TORCH_SHIM = re.compile(r"^(aoti_torch_|aoti_record_function_|torch_)\w+$")

# Python's limited API as the binding uses it; each is in the stable ABI
# (Py_LIMITED_API = 3.10 makes the compiler refuse the rest; this list keeps
# the audit explicit: a new one is added here after checking it is stable).
PYTHON_LIMITED = {
    "PyArg_ParseTuple", "PyCFunction_GetFlags", "PyCFunction_GetFunction", "PyCFunction_GetSelf",
    "PyCMethod_New", "PyCapsule_GetPointer", "PyErr_Clear", "PyErr_Occurred",
    "PyErr_SetString", "PyEval_RestoreThread", "PyEval_SaveThread", "PyExc_RuntimeError", "PyFloat_AsDouble",
    "PyFloat_Type", "PyGILState_Ensure", "PyGILState_Release", "PyLong_AsDouble", "PyLong_AsLong",
    "PyLong_AsLongLongAndOverflow", "PyLong_FromLongLong", "PyLong_Type", "PyObject_CallFunctionObjArgs",
    "PyObject_CallNoArgs", "PyObject_GetAttr", "PyTuple_New", "PyTuple_SetItem",
    "PyType_GetSlot",
    "PyUnicode_InternFromString",
    "_Py_Dealloc", "_Py_FalseStruct", "_Py_NoneStruct", "_Py_NotImplementedStruct", "_Py_TrueStruct",
}

CUDA = re.compile(r"^(cuda|cu)[A-Z]\w*$")

# C++ symbols of torch's own (and pybind11's): their ABI is torch's build's.
TORCH_CPP = re.compile(r"\b(c10|at|torch|caffe2|pybind11)::")


def _binding_path(backend: str = "cpu") -> str:
    registry.get("softmax", device=backend)
    paths = [b.path for name, b in STATE.bindings.items() if name.startswith(f"kreg_binding_{backend}_")]
    assert len(paths) == 1, paths
    return paths[0]


def _undefined(path: str) -> list[str]:
    """What the loader must find for `path` (weak references it may leave unset aside)."""
    out = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True, check=True).stdout
    return sorted({line.split()[-1].split("@")[0] for line in out.splitlines()
                   if line.strip() and line.split()[0] not in ("w", "v")})


def _demangled(names: list[str]) -> dict[str, str]:
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def _runtime_symbols(path: str) -> set[str]:
    """What the C and C++ runtimes the binding needs define (libc, libm,
    libgcc_s, libstdc++, the loader), found where the loader finds them."""
    libs = []
    for line in subprocess.run(["ldd", path], capture_output=True, text=True).stdout.splitlines():
        found = re.search(r"(lib(c|m|gcc_s|stdc\+\+|dl|pthread)\.so[.\d]*|ld-linux[-\w.]*\.so[.\d]*) => (\S+)", line)
        loader = re.match(r"\s*(/\S*ld-linux[-\w.]*\.so[.\d]*) \(", line)  # listed by its path alone
        if found:
            libs.append(found.group(3))
        elif loader:
            libs.append(loader.group(1))
    symbols: set[str] = set()
    for lib in libs:
        out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
        symbols |= {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    return symbols


def _torch_python_symbols() -> set[str]:
    import torch

    lib = Path(torch.__file__).parent / "lib" / "libtorch_python.so"
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def unstable_symbols(path: str) -> list[str]:
    """The binding's undefined symbols outside the stable set, each with why."""
    undefined = _undefined(path)
    runtime, torch_python = _runtime_symbols(path), _torch_python_symbols()
    names = _demangled(undefined)
    bad = []
    for symbol in undefined:
        readable = names.get(symbol, symbol)
        if TORCH_CPP.search(readable):
            bad.append(f"{readable} (a C++ symbol of torch's)")
        elif symbol in torch_python:
            bad.append(f"{readable} (libtorch_python's)")
        elif TORCH_SHIM.match(symbol) or symbol in PYTHON_LIMITED or CUDA.match(symbol):
            continue
        elif symbol.startswith(("Py", "_Py")):
            bad.append(f"{symbol} (not in the limited API list above)")
        elif symbol not in runtime:
            bad.append(f"{readable} (defined by none of the C/C++ runtimes)")
    return bad


def test_the_binding_asks_only_for_stable_symbols():
    path = _binding_path("cpu")
    assert len(_undefined(path)) > 50  # the shims, Python, the runtimes: the list is read
    assert unstable_symbols(path) == []
    needed = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    assert "libtorch_python" not in needed and "libpython" not in needed and "libc10.so" not in needed, needed


# The oldest C and C++ runtimes a binding must load on: Debian 12's (glibc
# 2.36, g++ 12's libstdc++: GLIBCXX_3.4.30, CXXABI_1.3.13). The binding's key
# leaves the host compiler out, so one built with g++ 13 (Ubuntu 24.04) reaches
# such a machine through the team's cache or a carried cache.
RUNTIME_FLOOR = {"GLIBC": (2, 36), "GLIBCXX": (3, 4, 30), "CXXABI": (1, 3, 13)}


def versions_above_the_floor(version_needs: str) -> list[str]:
    """The symbol versions in readelf -V's "Version needs" that the floor's runtimes lack."""
    found = set(re.findall(r"Name: (GLIBCXX|GLIBC|CXXABI)_([\d.]+)", version_needs))
    return sorted(f"{name}_{v}" for name, v in found if tuple(map(int, v.split("."))) > RUNTIME_FLOOR[name])


def test_the_binding_needs_no_runtime_newer_than_g12s():
    """Where the binding is built with g++ 13 or later (whose <iostream>,
    included by torch's stable headers, asks for GLIBCXX_3.4.32), this is what
    core/stable_binding_text.cc's definition of std::ios_base_library_init keeps."""
    path = _binding_path("cpu")
    needs = subprocess.run(["readelf", "-V", "--wide", path], capture_output=True, text=True, check=True).stdout
    assert "GLIBCXX_3.4" in needs  # the section is read
    assert versions_above_the_floor(needs) == []


def test_the_runtime_floor_sees_a_newer_version():
    needs = ("  0x0030:   Name: GLIBC_2.38  Flags: none  Version: 15\n"
             "  0x00a0:   Name: GLIBCXX_3.4.32  Flags: none  Version: 11\n"
             "  0x00b0:   Name: GLIBCXX_3.4.30  Flags: none  Version: 8\n"
             "  0x00c0:   Name: CXXABI_1.3.9  Flags: none  Version: 4\n")
    assert versions_above_the_floor(needs) == ["GLIBCXX_3.4.32", "GLIBC_2.38"]


def test_the_audit_sees_a_torch_cpp_symbol(tmp_path):
    """The audit itself fails on what it must catch: a library calling into c10."""
    source = tmp_path / "uses_c10.cpp"
    source.write_text("namespace c10 { void warn_about(const char*); }\n"
                      "extern \"C\" void f() { c10::warn_about(\"x\"); }\n")
    library = tmp_path / "libuses_c10.so"
    subprocess.run(["c++", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    assert unstable_symbols(str(library)) == ["c10::warn_about(char const*) (a C++ symbol of torch's)"]
