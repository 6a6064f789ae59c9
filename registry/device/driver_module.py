"""A cubin loaded with the CUDA driver API and bound into a launcher library.
(An image of several cubins, module_images.py, binds the same way: this
loads its first module, the library the others on their first lookup.)

cuModuleLoadData takes the cubin bytes (0.1-0.3 ms); the launcher library's
kreg_bind_device_module (registry/include/kreg/launch_runtime.cc) then gets
the module and the driver's cuModuleGetFunction / cuLaunchKernel /
cuGetErrorString / cuFuncSetAttribute / cuLaunchKernelEx, so the library
links neither libcuda nor the CUDA runtime.
Modules are never unloaded: an old op handle or a compiled graph may still
launch from one.

A module belongs to the CUDA context it was loaded in: torch's primary
context of a device. So the registry loads the cubin for the current device
when it binds, and the launcher library loads it for any other device on the
first launch there (kreg_launch asks the driver for the current context's
device: the binding makes the inputs' device current), keyed by device: a
call on a second GPU never launches the first GPU's function.
"""
from __future__ import annotations

import ctypes

from registry.errors import RegistryError
from registry.state import STATE

_driver = None
# (cubin key, device) -> CUmodule handle, per process; loaded once, never
# unloaded. A module belongs to one context: one per device.
_modules = STATE.device_modules
# cubin key -> its bytes, kept alive for the launcher library, which loads
# them into a device's context on its first launch there.
_images = STATE.device_images


def _cuda():
    global _driver
    if _driver is None:
        try:
            _driver = ctypes.CDLL("libcuda.so.1")
        except OSError as error:
            raise RegistryError(f"the CUDA driver (libcuda.so.1) could not be loaded: {error}") from None
        _driver.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return _driver


def _check(result: int, what: str) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        _cuda().cuGetErrorString(result, ctypes.byref(text))
        raise RegistryError(f"{what} failed: {(text.value or b'error %d' % result).decode()}")


def _ensure_context() -> None:
    """torch's primary context of the current device, made current on this thread."""
    import torch

    torch.cuda.init()
    device = torch.cuda.current_device()
    torch.cuda.synchronize(device)  # creates the primary context if nothing has yet
    driver = _cuda()
    ctx = ctypes.c_void_p()
    _check(driver.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        _check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def warm_up_context() -> None:
    """Start CUDA's initialization and the primary context (a few hundred ms on a
    large GPU) on a thread, so a first `get` in a process pays for it while its
    compilers run, not after them. Only before torch has touched CUDA: then the
    current device of every thread is device 0, the one bind() will use."""
    import threading

    import torch

    if torch.cuda.is_initialized():
        return

    def warm():
        try:
            torch.cuda.init()
            torch.cuda.synchronize()  # creates the primary context
        except Exception:  # noqa: BLE001  bind() initializes again and reports what fails
            pass

    threading.Thread(target=warm, name="kreg-cuda-context", daemon=True).start()


def load_module(key: str, cubin_path: str) -> tuple[int, int, bytes]:
    """(module, device, image): the cubin loaded into the current device's
    primary context, once per (cubin, device). Other devices' modules are
    loaded by the launcher library on its first launch there."""
    import torch

    _ensure_context()
    device = torch.cuda.current_device()
    image = _images.get(key)
    if image is None:
        with open(cubin_path, "rb") as cubin:
            image = _images[key] = cubin.read()  # kept: the library loads it for other devices
    module = _modules.get((key, device))
    if module is None:
        from registry.device import module_images

        handle = ctypes.c_void_p()  # the first module (of several: module_images.py); the library loads the rest
        _check(_cuda().cuModuleLoadData(ctypes.byref(handle), module_images.split(image)[0]),
               f"cuModuleLoadData({cubin_path})")
        module = _modules[(key, device)] = handle.value
    return module, device, image


def bind(library, key: str, cubin_path: str) -> None:
    """Point a launcher library's kreg_launch at this cubin: its module on the
    current device now, on any other device at the first launch there."""
    module, device, image = load_module(key, cubin_path)
    driver = _cuda()
    entry = [ctypes.cast(getattr(driver, name), ctypes.c_void_p)
             for name in ("cuModuleGetFunction", "cuLaunchKernel", "cuGetErrorString", "cuCtxGetDevice",
                          "cuModuleLoadData", "cuFuncSetAttribute")]
    # cuLaunchKernelEx (clusters) came with CUDA 11.8: null before, and kreg_launch_cluster says so.
    entry.append(ctypes.cast(getattr(driver, "cuLaunchKernelEx", None), ctypes.c_void_p))
    bind_fn = library.kreg_bind_device_module
    bind_fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p] * 7
    bind_fn.restype = None
    bind_fn(image, len(image), ctypes.c_void_p(module), device, *entry)
