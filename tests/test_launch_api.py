"""kreg/launch.h without a GPU: axpy_nvrtc's host launchers, compiled with the
launch runtime and no CUDA header, call a stand-in driver bound the way
registry/device/driver_module.py binds the real one. Checks which kernels they
launch, with which grids and argument values, and that rebinding a new
module takes effect (the device-code hot swap)."""
from __future__ import annotations

import ctypes
import struct
import subprocess

import pytest

from conftest import CHECKOUT
from registry.build import keys
from kreg_tensor import KregTensor

GetFunction = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p)
Launch = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
ErrorString = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))


@pytest.fixture(scope="module")
def launchers(tmp_path_factory):
    out = tmp_path_factory.mktemp("launch") / "liblaunch.so"
    kernel = CHECKOUT / "kernels" / "axpy_nvrtc"
    subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
                    f"-I{kernel}", f"-I{kernel / 'include'}", f"-I{keys.REGISTRY_INCLUDE}",
                    str(kernel / "axpy_launch.cpp"), str(keys.LAUNCH_RUNTIME), "-o", str(out)], check=True)
    return ctypes.CDLL(str(out))


class FakeDriver:
    """Records launches; module handles are small integers, functions name strings."""

    def __init__(self, missing=()):
        self.launches, self.missing, self.names = [], set(missing), []

        def get_function(fn, module, name):
            if name.decode() in self.missing:
                return 500  # CUDA_ERROR_NOT_FOUND
            self.names.append((module, name.decode()))
            fn[0] = len(self.names)
            return 0

        def launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            module, name = self.names[fn - 1]
            # The values must be read now: they live in the launcher's frame.
            count = 5 if "vectorized" in name else 6
            self.launches.append({"module": module, "kernel": name, "grid": (gx, gy, gz),
                                  "block": (bx, by, bz), "stream": stream,
                                  "params": [ctypes.string_at(params[i], 8) for i in range(count)]})
            return 0

        def error_string(result, text):
            text[0] = b"named driver error"
            return 0

        self._callbacks = (GetFunction(get_function), Launch(launch), ErrorString(error_string))

    def bind(self, library, module: int) -> None:
        library.kreg_bind_device_module.argtypes = [ctypes.c_void_p] * 4
        library.kreg_bind_device_module(module, *[ctypes.cast(c, ctypes.c_void_p) for c in self._callbacks])


def _tensor(address: int, n: int) -> KregTensor:
    return KregTensor(address, n, 1, None, None)


def _call(library, suffix: str, n: int, base: int = 0x10000, alpha: float = 2.0, stream: int = 0x77):
    fn = getattr(library, f"axpy_{suffix}")
    fn.restype = ctypes.c_char_p
    fn.argtypes = [KregTensor, KregTensor, KregTensor, ctypes.c_float, ctypes.c_void_p]
    return fn(_tensor(base + 0x2000, n), _tensor(base, n), _tensor(base + 0x1000, n), alpha, stream)


def test_unbound_library_says_what_is_missing(tmp_path):
    kernel = CHECKOUT / "kernels" / "axpy_nvrtc"
    out = tmp_path / "lib.so"
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", f"-I{kernel}", f"-I{kernel / 'include'}",
                    f"-I{keys.REGISTRY_INCLUDE}", str(kernel / "axpy_launch.cpp"), str(keys.LAUNCH_RUNTIME),
                    "-o", str(out)], check=True)
    assert b"no device module is bound" in _call(ctypes.CDLL(str(out)), "f32", 1024)


def test_aligned_input_launches_the_vector_kernel_then_the_tail(launchers):
    driver = FakeDriver()
    driver.bind(launchers, 1)
    # 3 blocks of 256 threads x 4 float4 vectors each, one more vector (a 4th
    # block) and a 1-element tail for the scalar kernel.
    n = 4 * 256 * 4 * 3 + 5
    assert _call(launchers, "f32", n) is None
    first, second = driver.launches
    assert first["kernel"] == "axpy_vectorized_f32" and second["kernel"] == "axpy_scalar_f32"
    assert first["grid"] == (4, 1, 1) and first["block"] == (256, 1, 1)
    assert first["stream"] == 0x77
    # Parameter values the kernel will read: x, y, out, vectors, alpha.
    params = first["params"]
    word = lambda raw: int.from_bytes(raw, "little")
    assert [word(p) for p in params[:3]] == [0x10000, 0x11000, 0x12000]
    assert word(params[3]) == n // 4
    assert struct.unpack("<f", params[4][:4])[0] == 2.0
    tail = second["params"]
    assert word(tail[3]) == (n // 4) * 4 and word(tail[4]) == n  # [begin, end)


def test_misaligned_input_takes_the_scalar_kernel_only(launchers):
    driver = FakeDriver()
    driver.bind(launchers, 1)
    assert _call(launchers, "bf16", 1000, base=0x10002) is None
    assert [l["kernel"] for l in driver.launches] == ["axpy_scalar_bf16"]


def test_rebinding_switches_to_the_new_module(launchers):
    driver = FakeDriver()
    driver.bind(launchers, 1)
    _call(launchers, "f16", 8)
    driver.bind(launchers, 2)
    _call(launchers, "f16", 8)
    assert [l["module"] for l in driver.launches] == [1, 2]


def test_missing_kernel_is_an_error_string(launchers):
    driver = FakeDriver(missing={"axpy_vectorized_f32"})
    driver.bind(launchers, 3)
    error = _call(launchers, "f32", 4096)
    assert error is not None and b"extern \"C\" __global__" in error
