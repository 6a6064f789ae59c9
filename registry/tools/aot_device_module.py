"""The device code of an AOT package's CUDA kernels, bound into its launcher
module: copied by registry/tools/aot.py into a package whose kernel builds
its device code into a cubin (compiler = "nvrtc" or "nvcc-cubin"), as
<package>/_device_module.py. It imports nothing of the registry.

The package carries one cubin per GPU architecture it was exported for
(_device/sm_90a.cubin, ...). bind() hands one to the launch runtime compiled
into the launcher module (kreg/launch_runtime.cc, kreg_bind_device_module),
with the CUDA driver's entry points, as the registry binds a JIT build
(registry/device/driver_module.py). No module is loaded here: the runtime
loads the cubin into a device's context on the first launch there, so
importing the package creates no CUDA context (with one cubin; with several,
choosing one asks torch for the current device's capability).
"""
import ctypes
import os

# The images stay alive for the process: the runtime reads one on each device's first launch.
_images = []

# kreg_bind_device_module's driver entries, in its order: the plain names, as the registry binds them.
_ENTRIES = ("cuModuleGetFunction", "cuLaunchKernel", "cuGetErrorString", "cuCtxGetDevice", "cuModuleLoadData",
            "cuFuncSetAttribute")


def choose(folder):
    """The cubin for the current device: the only one, else the one of its
    capability (arch-specific first: sm_90a before sm_90)."""
    cubins = sorted(name for name in os.listdir(folder) if name.endswith(".cubin"))
    if len(cubins) == 1:
        return cubins[0]
    import torch

    major, minor = torch.cuda.get_device_capability()
    for suffix in ("a", "f", ""):
        if f"sm_{major}{minor}{suffix}.cubin" in cubins:
            return f"sm_{major}{minor}{suffix}.cubin"
    raise ImportError(f"the package's device code was built for {', '.join(c[:-6] for c in cubins)}, not for "
                      f"this GPU (sm_{major}{minor}): export it again with TORCH_CUDA_ARCH_LIST naming "
                      f"{major}.{minor}")


def bind(library_path, folder):
    """Points the launchers of `library_path` (the package's _C_cuda) at the
    cubin in `folder` chosen for this process."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        raise ImportError(f"the CUDA driver (libcuda.so.1) could not be loaded: {error}") from None
    with open(os.path.join(folder, choose(folder)), "rb") as cubin:
        image = cubin.read()
    _images.append(image)
    entries = [ctypes.cast(getattr(driver, name), ctypes.c_void_p) for name in _ENTRIES]
    # cuLaunchKernelEx (clusters) came with CUDA 11.8: null before, and kreg_launch_cluster says so.
    entries.append(ctypes.cast(getattr(driver, "cuLaunchKernelEx", None), ctypes.c_void_p))
    bind_module = ctypes.CDLL(library_path).kreg_bind_device_module
    bind_module.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p] * 7
    bind_module.restype = None
    bind_module(image, len(image), None, -1, *entries)  # no module, no device: each device loads it on first launch
