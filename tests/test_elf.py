"""registry/builder/elf.py: what a library exports and needs, read from the
file without loading it (a CUDA library opened and closed before its
published copy is opened breaks that copy's launches)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from registry.builder import elf

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF")

SOURCE = """
extern "C" __attribute__((visibility("default"))) int exported(int x) { return x + 1; }
extern "C" __attribute__((visibility("default"), weak)) int weak_entry(int x) { return x; }
extern "C" int hidden_one(int x) { return x * 2; }
#include <cstdio>
extern "C" __attribute__((visibility("default"))) int caller(const char* s) { return std::puts(s); }
static int file_local(int x) { return x - 1; }
__attribute__((visibility("default"))) int (*keep)(int) = file_local;
"""


def _library(tmp_path):
    (tmp_path / "lib.cpp").write_text(SOURCE)
    out = tmp_path / "lib.so"
    subprocess.run(["c++", "-shared", "-fPIC", "-fvisibility=hidden", str(tmp_path / "lib.cpp"), "-o", str(out)],
                   check=True)
    return str(out)


def test_exported_symbols_are_those_dlsym_finds(tmp_path):
    import ctypes

    path = _library(tmp_path)
    names = elf.exported_symbols(path)
    assert {"exported", "weak_entry", "caller", "keep"} <= names
    assert not {"hidden_one", "puts", "file_local"} & names
    library = ctypes.CDLL(path)  # the loader agrees, name by name
    for name in ("exported", "weak_entry", "caller", "keep"):
        assert hasattr(library, name)
    assert not hasattr(library, "hidden_one")


def test_what_is_not_an_elf_library_reads_as_none(tmp_path):
    (tmp_path / "not.so").write_bytes(b"\x7fELF but cut short")
    (tmp_path / "text.so").write_text("libc.so.6")
    for name in ("not.so", "text.so", "missing.so"):
        assert elf.exported_symbols(str(tmp_path / name)) is None
        assert elf.needed_libraries(str(tmp_path / name)) is None
