"""Bad manifests and bad names, through the public API: each bad manifest is
a registry.ManifestError naming the file and the field; a bad kernel name
never reaches a path."""
from __future__ import annotations

import itertools
import os
import stat
import sys
from pathlib import Path

import pytest

import registry
from conftest import KernelCopy

_names = itertools.count()

MANIFEST = """format = 1
description = "out = alpha * x + y"
include_dirs = ["include"]
reference = "reference.py"

[cpu]
sources = ["axpy_cpu.cpp"]
cflags = ["-O3"]

[cuda]
sources = ["axpy.cu"]
cflags = ["-O3", "-lineinfo"]

[[op]]
signature = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"
dtypes = ["float32", "float16", "bfloat16"]
"""

TOP = "format = 1\n"
CPU_SOURCES = 'sources = ["axpy_cpu.cpp"]'
CPU_TABLE = '[cpu]\nsources = ["axpy_cpu.cpp"]\ncflags = ["-O3"]\n'
CUDA_TABLE = '[cuda]\nsources = ["axpy.cu"]\ncflags = ["-O3", "-lineinfo"]\n'
DTYPES = 'dtypes = ["float32", "float16", "bfloat16"]'
SIGNATURE = 'signature = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"'

# id: (text replaced, replacement, field the error must name, words it must say)
CASES = {
    "missing_format": (TOP, "", "format", "missing"),
    "format_wrong_type": (TOP, 'format = "1"\n', "format", "expected the integer 1, got a string"),
    "format_unknown_version": (TOP, "format = 2\n", "format", "unsupported format 2"),
    "missing_sources": (CPU_SOURCES, "", "cpu.sources", "missing"),
    "sources_not_a_list": (CPU_SOURCES, 'sources = "axpy_cpu.cpp"', "cpu.sources", "expected an array of strings"),
    "source_not_a_string": (CPU_SOURCES, "sources = [3]", "cpu.sources[0]", "expected a string, got an integer"),
    "sources_empty": (CPU_SOURCES, "sources = []", "cpu.sources", "empty"),
    "cpu_not_a_table": (CPU_TABLE, 'cpu = "axpy_cpu.cpp"\n', "cpu", "expected a table"),
    "description_wrong_type": ('description = "out = alpha * x + y"', "description = 3", "description", "expected a string"),
    "unknown_top_key": (TOP, TOP + 'descripton = "typo"\n', "descripton", 'did you mean "description"'),
    "unknown_backend_key": ('cflags = ["-O3"]\n', 'flags = ["-O3"]\n', "cpu.flags", 'did you mean "cflags"'),
    "unknown_op_key": (DTYPES, 'dtype = ["float32"]', "op[0].dtype", 'did you mean "dtypes"'),
    "nonexistent_source": (CPU_SOURCES, 'sources = ["missing.cpp"]', "cpu.sources[0]", "does not exist"),
    "dotdot_path": (CPU_SOURCES, 'sources = ["../axpy/axpy_cpu.cpp"]', "cpu.sources[0]", 'contains ".."'),
    "dotdot_inside_path": (CPU_SOURCES, 'sources = ["include/../axpy_cpu.cpp"]', "cpu.sources[0]", 'contains ".."'),
    "absolute_path": (CPU_SOURCES, 'sources = ["/etc/hostname"]', "cpu.sources[0]", "absolute path"),
    "source_is_a_folder": (CPU_SOURCES, 'sources = ["include"]', "cpu.sources[0]", "not a regular file"),
    "symlinked_source_escapes": (CPU_SOURCES, 'sources = ["linked.cpp"]', "cpu.sources[0]", "outside the kernel folder"),
    "symlinked_include_dir_escapes": ('include_dirs = ["include"]', 'include_dirs = ["linked_dir"]', "include_dirs[0]", "outside the kernel folder"),
    "include_dir_is_a_file": ('include_dirs = ["include"]', 'include_dirs = ["axpy.h"]', "include_dirs[0]", "not a directory"),
    "missing_header": (TOP, TOP + 'headers = ["nope.h"]\n', "headers[0]", "does not exist"),
    "missing_reference": ('reference = "reference.py"', 'reference = "nope.py"', "reference", "does not exist"),
    "invalid_name_key": (TOP, TOP + 'name = "Bad-Name"\n', "name", "invalid kernel name"),
    "name_path_key": (TOP, TOP + 'name = "../etc"\n', "name", "invalid kernel name"),
    "name_wrong_type": (TOP, TOP + "name = 5\n", "name", "expected a string"),
    "unknown_binding": (TOP, TOP + 'binding = "magic"\n', "binding", "unknown binding"),
    "no_backend": (CPU_TABLE + "\n" + CUDA_TABLE, "", "", "no backend"),
    "no_op": ("[[op]]\n" + SIGNATURE + "\n" + DTYPES + "\n", "", "op", "no op"),
    "op_not_an_array": ("[[op]]", "[op]", "op", "write [[op]], not [op]"),
    "missing_signature": (SIGNATURE + "\n", "", "op[0].signature", "missing"),
    "bad_signature": (SIGNATURE, 'signature = "axpy(Tensr x) -> Tensor"', "op[0].signature", "Tensr"),
    "dtype_alias": (DTYPES, 'dtypes = ["float32", "half"]', "op[0].dtypes[1]", 'write "float16"'),
    "dtypes_not_a_list": (DTYPES, 'dtypes = "float32"', "op[0].dtypes", "expected an array of strings"),
    "invalid_toml": (TOP, TOP + "[[[\n", "", "invalid TOML"),
}


def _kernel(root: Path, manifest: str) -> KernelCopy:
    copy = KernelCopy(root, "axpy", f"axpy_bad{next(_names)}")
    copy.path("kernel.toml").write_text(manifest)
    outside = root.parent / "outside_files"
    outside.mkdir(exist_ok=True)
    (outside / "secret.cpp").write_text("int secret;\n")
    os.symlink(outside / "secret.cpp", copy.path("linked.cpp"))
    os.symlink(outside, copy.path("linked_dir"))
    return copy


@pytest.mark.parametrize("case", list(CASES))
def test_bad_manifest_names_file_and_field(case, kernels_root):
    old, new, field, words = CASES[case]
    assert old in MANIFEST, f"case {case}: {old!r} is not in the base manifest"
    copy = _kernel(kernels_root, MANIFEST.replace(old, new, 1))
    with pytest.raises(registry.ManifestError) as info:
        registry.get(copy.name, device="cpu")
    error = info.value
    assert error.file == str(copy.path("kernel.toml")), error.file
    assert error.field == field, f"{case}: field {error.field!r}, message: {error}"
    assert words in str(error), f"{case}: {words!r} not in: {error}"
    assert str(error).startswith(f"{error.file}: " + (f"{field}: " if field else "")), str(error)


def test_base_manifest_is_valid(kernels_root):
    copy = _kernel(kernels_root, MANIFEST)
    assert registry.get(copy.name, device="cpu") is not None


@pytest.mark.parametrize("folder, name", [("Bad-Kernel", "bad_kernel"), ("1axpy", "_1axpy"),
                                          ("axpy.v2", "axpy_v2"), ("UPPER", "upper"), ("x" * 65, "")])
def test_any_folder_name_gives_a_kernel_name_or_says_why_not(folder, name, kernels_root):
    KernelCopy(kernels_root, "axpy", folder)
    listed = [k for k in registry.list() if k.folder == folder]
    assert len(listed) == 1
    if name:
        assert listed[0].name == name and listed[0].problem == ""
    else:
        assert 'set name = "..."' in listed[0].problem


BAD_NAMES = ["../outside_kernel", "..", ".", "", "/etc", "/etc/passwd", "axpy/../axpy", "axpy/",
             "axpy\x00", "~", "$HOME", "outside_kernel/../axpy", "..\\outside_kernel"]


def test_bad_name_never_reaches_a_path(kernels_root, cache_root):
    # A complete, valid kernel right next to the kernels root: a name that
    # became a path ("../outside_kernel") would find it.
    outside = kernels_root.parent / "outside_kernel"
    if not outside.exists():
        KernelCopy(kernels_root.parent, "axpy", "outside_kernel")
    memo_before = sorted(os.listdir(cache_root / "v1" / "memo"))
    touched = []
    watching = [True]

    def audit(event, args):
        if watching[0] and event in ("open", "os.listdir", "os.scandir", "os.mkdir", "os.rename",
                                     "os.remove", "os.symlink", "os.chmod", "shutil.copytree"):
            if any("outside_kernel" in str(a) or "/etc" == str(a) for a in args):
                touched.append((event, args))

    sys.addaudithook(audit)  # cannot be removed: switched off through `watching`
    try:
        for name in BAD_NAMES:
            with pytest.raises(registry.KernelNotFoundError):
                registry.get(name, device="cpu")
    finally:
        watching[0] = False
    assert touched == []
    assert sorted(os.listdir(cache_root / "v1" / "memo")) == memo_before


def test_cache_folders_are_private(binding_seed_root):
    for sub in ("v1", "v1/objects", "v1/tmp", "v1/locks", "v1/memo"):
        mode = stat.S_IMODE((binding_seed_root / sub).stat().st_mode)
        assert mode == 0o700, f"{sub} has mode {oct(mode)}"


@pytest.fixture
def binding_seed_root(cache_root, kernels_root) -> Path:
    """The session cache after at least one real get created it."""
    copy = KernelCopy(kernels_root, "axpy", f"axpy_modes{next(_names)}")
    registry.get(copy.name, device="cpu")
    return cache_root


def test_fresh_cache_is_private_whatever_the_umask(tmp_path):
    from registry import _core

    old = os.umask(0)
    try:
        _core.CacheStore(str(tmp_path / "fresh" / "cache"))
    finally:
        os.umask(old)
    for sub in ("v1", "v1/objects", "v1/tmp", "v1/locks", "v1/memo"):
        mode = stat.S_IMODE((tmp_path / "fresh" / "cache" / sub).stat().st_mode)
        assert mode == 0o700, f"{sub} has mode {oct(mode)}"
