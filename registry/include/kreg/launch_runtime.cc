// The launch API (kreg/launch.h) inside a launcher library: compiled into
// every kernel library whose device code is a cubin (NVRTC, nvcc -cubin). It
// holds the bound cubin, its module per device (loaded on the first launch on
// each) and the driver's entry points, handed over by the registry
// (registry/device/driver_module.py) through kreg_bind_device_module, so the library
// needs neither CUDA headers nor libcuda at link time.
#include <pthread.h>
#include <string.h>

#include "kreg/launch.h"

namespace {

// Driver API signatures, by value (CUresult is an int, handles are pointers,
// CUdevice an int).
using GetFunction = int (*)(void** function, void* module, const char* name);
using LaunchKernel = int (*)(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, void* stream,
                             void** params, void** extra);
using ErrorString = int (*)(int result, const char** text);
using CtxGetDevice = int (*)(int* device);
using ModuleLoadData = int (*)(void** module, const void* image);

constexpr int kCachedFunctions = 32;
constexpr int kMaxDevices = 64;

// A module belongs to the context it was loaded in: one per device (its
// primary context, torch's), loaded on the first launch there, with the
// functions looked up in it.
struct DeviceModule {
  void* module = nullptr;
  const char* names[kCachedFunctions] = {};
  void* functions[kCachedFunctions] = {};
  int cached = 0;
};

struct Bound {
  const void* image = nullptr;  // the cubin's bytes, kept alive by the registry
  GetFunction get_function = nullptr;
  LaunchKernel launch = nullptr;
  ErrorString error_string = nullptr;
  CtxGetDevice ctx_get_device = nullptr;
  ModuleLoadData module_load_data = nullptr;
  DeviceModule devices[kMaxDevices];
};

Bound bound;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

const char* driver_error(int result, const char* fallback) {
  const char* text = nullptr;
  if (bound.error_string != nullptr && bound.error_string(result, &text) == 0 && text != nullptr) return text;
  return fallback;
}

}  // namespace

// Binds a new cubin (`image`, kept alive by the caller) with the module the
// registry loaded for `device`; other devices load theirs on first use.
// Modules of the previous cubin stay loaded (never unloaded: an old graph may
// launch from them) but are no longer used.
extern "C" __attribute__((visibility("default"))) void kreg_bind_device_module(
    const void* image, void* module, int device, void* get_function, void* launch, void* error_string,
    void* ctx_get_device, void* module_load_data) {
  pthread_mutex_lock(&lock);
  bound.image = image;
  bound.get_function = reinterpret_cast<GetFunction>(get_function);
  bound.launch = reinterpret_cast<LaunchKernel>(launch);
  bound.error_string = reinterpret_cast<ErrorString>(error_string);
  bound.ctx_get_device = reinterpret_cast<CtxGetDevice>(ctx_get_device);
  bound.module_load_data = reinterpret_cast<ModuleLoadData>(module_load_data);
  for (DeviceModule& d : bound.devices) d = DeviceModule{};
  if (device >= 0 && device < kMaxDevices) bound.devices[device].module = module;
  pthread_mutex_unlock(&lock);
}

extern "C" const char* kreg_launch(const char* kernel, kreg_dim3 grid, kreg_dim3 block, unsigned shared_bytes,
                                   void* stream, void** args) {
  pthread_mutex_lock(&lock);
  if (bound.image == nullptr) {
    pthread_mutex_unlock(&lock);
    return "no device module is bound to this launcher library (the registry binds it on get)";
  }
  // The device of the current context: the binding made the inputs' device
  // current (a device guard), so a call on another GPU launches from that
  // GPU's module, never from another context's.
  int device = -1;
  int result = bound.ctx_get_device(&device);
  if (result != 0 || device < 0 || device >= kMaxDevices) {
    pthread_mutex_unlock(&lock);
    return result != 0 ? "kreg_launch: no CUDA context is current on this thread (cuCtxGetDevice failed)"
                       : "kreg_launch: the current CUDA device is beyond the 64 the launcher library serves";
  }
  DeviceModule& here = bound.devices[device];
  if (here.module == nullptr) {
    result = bound.module_load_data(&here.module, bound.image);
    if (result != 0) {
      here.module = nullptr;
      pthread_mutex_unlock(&lock);
      return driver_error(result, "kreg_launch: cuModuleLoadData failed for the current device");
    }
  }
  void* function = nullptr;
  for (int i = 0; i < here.cached; ++i) {
    if (strcmp(here.names[i], kernel) == 0) function = here.functions[i];
  }
  if (function == nullptr) {
    result = bound.get_function(&function, here.module, kernel);
    if (result != 0) {
      pthread_mutex_unlock(&lock);
      return "kreg_launch: no such kernel in the device module (declare it extern \"C\" __global__)";
    }
    if (here.cached < kCachedFunctions) {
      here.names[here.cached] = kernel;
      here.functions[here.cached++] = function;
    }
  }
  LaunchKernel launch = bound.launch;
  pthread_mutex_unlock(&lock);
  result = launch(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, args,
                  nullptr);
  return result == 0 ? nullptr : driver_error(result, "kreg_launch: cuLaunchKernel failed");
}
