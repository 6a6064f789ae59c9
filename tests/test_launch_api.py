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
from registry.builder import keys
from kreg_tensor import KregTensor

GetFunction = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p)
Launch = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
ErrorString = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
CtxGetDevice = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))
ModuleLoadData = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
FuncSetAttribute = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
LaunchEx = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                            ctypes.POINTER(ctypes.c_void_p))


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
        self.device, self.loads = 0, []  # the current context's device; (device, image) per cuModuleLoadData

        self.kernels_of = {}  # module -> the kernels it holds (a module absent here holds every one)

        def get_function(fn, module, name):
            if name.decode() in self.missing or name.decode() not in self.kernels_of.get(module, {name.decode()}):
                return 500  # CUDA_ERROR_NOT_FOUND
            self.names.append((module, name.decode()))
            fn[0] = len(self.names)
            return 0

        def launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            module, name = self.names[fn - 1]
            # The values must be read now: they live in the launcher's frame.
            count = 5 if "vectorized" in name else 6 if name.startswith("axpy") else 1  # 1: SIZED_LAUNCHER's
            self.launches.append({"module": module, "kernel": name, "grid": (gx, gy, gz),
                                  "block": (bx, by, bz), "stream": stream,
                                  "params": [ctypes.string_at(params[i], 8) for i in range(count)]})
            return 0

        def error_string(result, text):
            text[0] = b"named driver error"
            return 0

        def ctx_get_device(device):
            device[0] = self.device
            return 0

        self.load_addresses = []

        def module_load_data(module, image):
            self.loads.append((self.device, ctypes.string_at(image)))
            self.load_addresses.append(image)
            module[0] = 1000 + len(self.loads)  # a module of this device's context
            return 0

        self.attributes, self.launches_ex, self.refuse_shared_above = [], [], None

        def func_set_attribute(fn, attribute, value):
            self.attributes.append((self.names[fn - 1][1], attribute, value))
            if self.refuse_shared_above is not None and attribute == 8 and value > self.refuse_shared_above:
                return 1  # CUDA_ERROR_INVALID_VALUE
            return 0

        def launch_ex(config, fn, params, extra):
            # CUlaunchConfig: 7 unsigned, the stream, the attributes, their count.
            words = struct.unpack_from("<7I4xQQI", ctypes.string_at(config, 56))
            attrs, count = words[8], words[9]
            raw = ctypes.string_at(attrs, 72 * count)
            attributes = [(struct.unpack_from("<i", raw, 72 * i)[0], struct.unpack_from("<3I", raw, 72 * i + 8))
                          for i in range(count)]
            self.launches_ex.append({"kernel": self.names[fn - 1][1], "grid": words[0:3], "block": words[3:6],
                                     "shared": words[6], "stream": words[7], "attributes": attributes})
            return 0

        self._callbacks = (GetFunction(get_function), Launch(launch), ErrorString(error_string),
                           CtxGetDevice(ctx_get_device), ModuleLoadData(module_load_data),
                           FuncSetAttribute(func_set_attribute), LaunchEx(launch_ex))

    def bind(self, library, module: int, device: int = 0, image: bytes = b"cubin") -> None:
        """What device_module.bind does: the cubin, loaded as `module` on `device`."""
        self._image = image  # alive while bound, as device_module keeps it
        library.kreg_bind_device_module.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int] + \
            [ctypes.c_void_p] * 7
        library.kreg_bind_device_module(image, len(image), module, device,
                                        *[ctypes.cast(c, ctypes.c_void_p) for c in self._callbacks])


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


def test_each_device_launches_from_its_own_module_loaded_on_first_use(launchers):
    # A module belongs to one context: a call whose current device is another
    # GPU must load the cubin there and launch from that module, never from
    # the first device's.
    driver = FakeDriver()
    driver.bind(launchers, 1, device=0, image=b"cubin-v1")
    _call(launchers, "f16", 8)
    driver.device = 1
    _call(launchers, "f16", 8)
    _call(launchers, "f16", 8)
    driver.device = 0
    _call(launchers, "f16", 8)
    assert [l["module"] for l in driver.launches] == [1, 1001, 1001, 1]
    assert driver.loads == [(1, b"cubin-v1")]  # loaded once for device 1, from the bound cubin

    # A rebuilt cubin: device 0 gets the registry's module, device 1 loads the new bytes.
    driver.bind(launchers, 2, device=0, image=b"cubin-v2")
    driver.device = 1
    _call(launchers, "f16", 8)
    driver.device = 0
    _call(launchers, "f16", 8)
    assert [l["module"] for l in driver.launches][-2:] == [1002, 2]
    assert driver.loads[-1] == (1, b"cubin-v2")


def tiny_elf(payload: bytes) -> bytes:
    """A 64-bit ELF file: its header, `payload` as one section, the section headers."""
    shoff = 64 + -(-len(payload) // 8) * 8
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0, 64, 0, 0,
                                                                 64, 2, 0)
    section = struct.pack("<IIQQQQIIQQ", 0, 1, 0, 0, 64, len(payload), 0, 0, 1, 0)  # PROGBITS at 64
    return header + payload.ljust(shoff - 64, b"\0") + bytes(64) + section


def test_an_image_of_several_modules_finds_each_kernel_in_its_own(launchers):
    """A linked kernel's kernels, a module each (registry/device/module_images.py):
    a kernel the first module lacks is looked up in the next, which is loaded
    from its own offset in the image on that first lookup, once."""
    from registry.device import module_images

    first, second = tiny_elf(b"vectorized kernel"), tiny_elf(b"scalar kernel, a little longer")
    image = module_images.join([first, second])
    assert module_images.split(image) == [first, second]
    driver = FakeDriver()
    driver.kernels_of = {1: {"axpy_vectorized_f32"}, 1001: {"axpy_scalar_f32"}}
    driver.bind(launchers, 1, image=image)
    n = 4 * 256 * 4 * 3 + 5  # the vector kernel, then the scalar tail
    assert _call(launchers, "f32", n) is None
    assert _call(launchers, "f32", n) is None
    assert [(l["kernel"], l["module"]) for l in driver.launches] == [
        ("axpy_vectorized_f32", 1), ("axpy_scalar_f32", 1001)] * 2
    base = ctypes.cast(ctypes.c_char_p(image), ctypes.c_void_p).value
    assert driver.load_addresses == [base + image.index(second)]


def test_an_image_of_real_cubins_is_split_where_module_images_joined_it(launchers):
    """Cubins as NVRTC writes them (section headers, program headers, padding):
    the runtime's split_images finds the second where the writer put it."""
    from registry.device import module_images
    from registry.device import nvrtc as nvrtc_lib

    nvrtc = nvrtc_lib.load()
    cubins = [nvrtc.compile(f'extern "C" __global__ void k{i}(float* y) {{ y[{i}] = {i}.0f; }}'.encode(),
                            f"k{i}.cu", ["-arch=sm_90"])[0] for i in range(3)]
    image = module_images.join(cubins)
    assert module_images.split(image) == cubins
    driver = FakeDriver()
    driver.kernels_of = {1: set(), 1001: set(), 1002: {"axpy_scalar_f32"}}  # the third module holds it
    driver.bind(launchers, 1, image=image)
    assert _call(launchers, "f32", 1, base=0x10002) is None  # misaligned: the scalar kernel alone
    base = ctypes.cast(ctypes.c_char_p(image), ctypes.c_void_p).value
    assert driver.load_addresses == [base + image.index(cubins[1]), base + image.index(cubins[2])]
    assert [l["module"] for l in driver.launches] == [1002]


def test_the_runtime_splits_as_many_modules_as_the_writer_joins():
    from registry.device import module_images

    assert f"kMaxModules = {module_images.MAX_MODULES};" in keys.LAUNCH_RUNTIME.read_text()


def test_module_images_of_one_cubin_or_none_are_the_image_itself():
    from registry.device import module_images

    one = tiny_elf(b"k")
    assert module_images.join([one]) == one and module_images.split(one) == [one]
    assert module_images.split(b"// PTX text") == [b"// PTX text"]
    with pytest.raises(ValueError):
        module_images.join([b"not ELF"])
    with pytest.raises(ValueError, match="at most 16"):  # what the launch runtime splits
        module_images.join([one] * (module_images.MAX_MODULES + 1))


def test_no_current_context_is_an_error_not_a_launch(launchers):
    driver = FakeDriver()
    driver.bind(launchers, 1)

    def no_context(device):
        return 201  # CUDA_ERROR_INVALID_CONTEXT

    driver._callbacks = driver._callbacks[:3] + (CtxGetDevice(no_context),) + driver._callbacks[4:]
    driver.bind(launchers, 1)
    error = _call(launchers, "f32", 16)
    assert error is not None and b"no CUDA context is current" in error
    assert driver.launches == []


# A launcher that launches one kernel with the dynamic shared memory and the
# cluster it is given, through the two entry points of kreg/launch.h.
SIZED_LAUNCHER = r"""
#include "kreg/launch.h"
extern "C" __attribute__((visibility("default"))) const char* sized(const char* kernel, unsigned shared,
                                                                    unsigned cluster_x, unsigned grid_x) {
  int value = 7;
  void* args[] = {&value};
  if (cluster_x == 0) return kreg_launch(kernel, kreg_dim3{grid_x, 1, 1}, kreg_dim3{128, 1, 1}, shared, nullptr, args);
  return kreg_launch_cluster(kernel, kreg_dim3{grid_x, 1, 1}, kreg_dim3{128, 1, 1}, kreg_dim3{cluster_x, 1, 1},
                             shared, nullptr, args);
}
"""


@pytest.fixture(scope="module")
def sized(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sized")
    (folder / "sized.cpp").write_text(SIZED_LAUNCHER)
    subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{keys.REGISTRY_INCLUDE}",
                    str(folder / "sized.cpp"), str(keys.LAUNCH_RUNTIME), "-o", str(folder / "libsized.so")], check=True)
    library = ctypes.CDLL(str(folder / "libsized.so"))
    library.sized.restype = ctypes.c_char_p
    library.sized.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint]
    return library


def test_dynamic_shared_memory_beyond_48_kb_raises_the_limit_once(sized):
    driver = FakeDriver()
    driver.bind(sized, 1)
    assert sized.sized(b"small", 48 * 1024, 0, 1) is None
    assert driver.attributes == []  # within the default: nothing to set
    for _ in range(3):
        assert sized.sized(b"gemm", 200 * 1024, 0, 1) is None
    assert sized.sized(b"gemm", 100 * 1024, 0, 1) is None  # covered by the limit already set
    assert driver.attributes == [("gemm", 8, 200 * 1024)]  # MAX_DYNAMIC_SHARED_SIZE_BYTES, once
    assert sized.sized(b"gemm", 220 * 1024, 0, 1) is None
    assert driver.attributes[-1] == ("gemm", 8, 220 * 1024)
    assert [l["kernel"] for l in driver.launches] == ["small"] + ["gemm"] * 5


def test_a_refused_shared_memory_size_names_the_kernel_and_the_value(sized):
    driver = FakeDriver()
    driver.refuse_shared_above = 227 * 1024
    driver.bind(sized, 1)
    error = sized.sized(b"gemm", 300 * 1024, 0, 1)
    assert error is not None and b'"gemm"' in error and str(300 * 1024).encode() in error
    assert b"named driver error" in error and driver.launches == []


def test_a_cluster_launches_through_launch_kernel_ex(sized):
    driver = FakeDriver()
    driver.bind(sized, 1)
    assert sized.sized(b"clustered", 64 * 1024, 2, 4) is None
    (launch,) = driver.launches_ex
    assert launch["kernel"] == "clustered" and launch["grid"] == (4, 1, 1) and launch["block"] == (128, 1, 1)
    assert launch["shared"] == 64 * 1024
    assert launch["attributes"] == [(4, (2, 1, 1))]  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert driver.attributes == [("clustered", 8, 64 * 1024)]
    assert sized.sized(b"clustered", 0, 1, 4) is None  # a cluster of one: a plain launch
    assert [l["kernel"] for l in driver.launches] == ["clustered"]


def test_a_grid_that_is_not_whole_clusters_is_refused_before_the_driver(sized):
    driver = FakeDriver()
    driver.bind(sized, 1)
    error = sized.sized(b"clustered", 0, 2, 3)
    assert error is not None and b'"clustered"' in error and b"3x1x1" in error and b"2x1x1" in error
    assert driver.launches_ex == []


def test_a_non_portable_cluster_is_allowed_once(sized):
    driver = FakeDriver()
    driver.bind(sized, 1)
    for _ in range(2):
        assert sized.sized(b"wide", 0, 16, 32) is None
    assert driver.attributes == [("wide", 14, 1)]  # NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    assert len(driver.launches_ex) == 2
