"""A freshly built kernel library is loaded from where it was published in the
cache, not from the staging folder its build ran in (renamed into the cache,
or removed when another process published first): the loader's own record of
the file (dladdr, dl_iterate_phdr: what gdb, perf and sanitizer reports use)
names a file that exists, in the cache."""
from __future__ import annotations

import ctypes
import os

import pytest
import torch

import registry
from registry.state import STATE


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(address: int) -> str:
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    assert libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) != 0
    return info.dli_fname.decode()


def _launcher_file(name: str) -> tuple[str, str]:
    key = registry.status(name, device="cpu").key
    library = STATE.libraries[key]
    address = ctypes.cast(getattr(library, "axpy_f32"), ctypes.c_void_p).value
    return _file_of(address), key


def test_a_fresh_kernel_library_is_loaded_from_its_cache_entry(axpy_copy, cache_root):
    op = registry.get(axpy_copy.name, device="cpu")  # built now, in this process
    assert registry.status(axpy_copy.name, device="cpu").compiled, "expected a fresh build"
    x = torch.randn(8)
    torch.testing.assert_close(op(x, x, 2.0), 3 * x)
    loaded, key = _launcher_file(axpy_copy.name)
    assert os.path.isfile(loaded), f"the loaded library's file is gone: {loaded}"
    assert loaded.startswith(str(cache_root)) and "/objects/" in loaded and "/tmp/" not in loaded[len(str(cache_root)):], loaded
    with open("/proc/self/maps") as maps:
        assert any(line.rstrip().endswith(loaded) for line in maps), "not mapped from the published file"

    # An edit: the new version, freshly built too, is loaded from its own entry.
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f")
    registry.get(axpy_copy.name, device="cpu")
    again, new_key = _launcher_file(axpy_copy.name)
    assert new_key != key and again != loaded and os.path.isfile(again), again
    torch.testing.assert_close(op(x, x, 2.0), 3 * x + 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_fresh_nvcc_kernel_library_is_loaded_from_its_cache_entry(axpy_copy, cache_root):
    # CUDA kernel libraries are built by torch's cpp_extension (built, not loaded, there).
    registry.get(axpy_copy.name, device="cuda")
    key = registry.status(axpy_copy.name, device="cuda").key
    address = ctypes.cast(getattr(STATE.libraries[key], "axpy_f32"), ctypes.c_void_p).value
    loaded = _file_of(address)
    assert os.path.isfile(loaded) and loaded.startswith(str(cache_root)) and "/objects/" in loaded, loaded


class _PhdrInfo(ctypes.Structure):
    _fields_ = [("dlpi_addr", ctypes.c_void_p), ("dlpi_name", ctypes.c_char_p)]


def _loaded_objects() -> list[str]:
    """The name the dynamic loader keeps for each loaded object (dl_iterate_phdr)."""
    names = []
    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_PhdrInfo), ctypes.c_size_t, ctypes.c_void_p)

    def seen(info, size, data):
        names.append((info.contents.dlpi_name or b"").decode())
        return 0

    libc = ctypes.CDLL(None)
    libc.dl_iterate_phdr(callback_type(seen), None)
    return names


def test_a_fresh_binding_is_loaded_from_its_cache_entry(axpy_copy, cache_root):
    import uuid

    # A signature new to the cache: only its kernel library builds; the shared
    # binding (built or fetched earlier in this process) serves it.
    axpy_copy.edit("kernel.toml", "float alpha) -> Tensor", f"float alpha_{uuid.uuid4().hex[:12]}) -> Tensor")
    op = registry.get(axpy_copy.name, device="cpu")
    assert "binding" not in registry.status(axpy_copy.name, device="cpu").compiled
    x = torch.randn(8)
    torch.testing.assert_close(op(x, x, 2.0), 3 * x)
    # What this get loaded: each artifact's file, as the dynamic loader names it,
    # exists and lies under the cache's objects/ (not in a staging folder). Other
    # libraries of the session may have been damaged or evicted on purpose by
    # earlier tests; they are not what this test is about.
    artifacts = registry.status(axpy_copy.name, device="cpu").artifacts
    binding = artifacts.get("binding axpy")
    assert binding, artifacts
    loaded = [name for name in _loaded_objects() if os.path.basename(name) == os.path.basename(str(binding))]
    assert loaded, f"the binding {binding} is not loaded"
    for name in loaded:
        assert os.path.isfile(name), f"loaded from a file that is gone: {name}"
        assert name.startswith(str(cache_root)) and "/objects/" in name, name
