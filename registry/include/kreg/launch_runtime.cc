// The launch API (kreg/launch.h) inside a launcher library: compiled into
// every kernel library whose device code NVRTC builds. It holds the bound
// module and the driver's entry points, handed over by the registry
// (registry/device/driver_module.py) through kreg_bind_device_module, so the library
// needs neither CUDA headers nor libcuda at link time.
#include <pthread.h>
#include <string.h>

#include "kreg/launch.h"

namespace {

// Driver API signatures, by value (CUresult is an int, handles are pointers).
using GetFunction = int (*)(void** function, void* module, const char* name);
using LaunchKernel = int (*)(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, void* stream,
                             void** params, void** extra);
using ErrorString = int (*)(int result, const char** text);

constexpr int kCachedFunctions = 32;

struct Bound {
  void* module = nullptr;
  GetFunction get_function = nullptr;
  LaunchKernel launch = nullptr;
  ErrorString error_string = nullptr;
  // name -> function of the bound module; names are the launcher's string
  // literals, compared by content.
  const char* names[kCachedFunctions] = {};
  void* functions[kCachedFunctions] = {};
  int cached = 0;
};

Bound bound;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

const char* driver_error(int result, const char* fallback) {
  const char* text = nullptr;
  if (bound.error_string != nullptr && bound.error_string(result, &text) == 0 && text != nullptr) return text;
  return fallback;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void kreg_bind_device_module(void* module, void* get_function,
                                                                               void* launch, void* error_string) {
  pthread_mutex_lock(&lock);
  bound.module = module;
  bound.get_function = reinterpret_cast<GetFunction>(get_function);
  bound.launch = reinterpret_cast<LaunchKernel>(launch);
  bound.error_string = reinterpret_cast<ErrorString>(error_string);
  bound.cached = 0;  // functions of the previous module stay valid (never unloaded) but are not used
  pthread_mutex_unlock(&lock);
}

extern "C" const char* kreg_launch(const char* kernel, kreg_dim3 grid, kreg_dim3 block, unsigned shared_bytes,
                                   void* stream, void** args) {
  pthread_mutex_lock(&lock);
  if (bound.module == nullptr) {
    pthread_mutex_unlock(&lock);
    return "no device module is bound to this launcher library (the registry binds it on get)";
  }
  void* function = nullptr;
  for (int i = 0; i < bound.cached; ++i) {
    if (strcmp(bound.names[i], kernel) == 0) function = bound.functions[i];
  }
  if (function == nullptr) {
    int result = bound.get_function(&function, bound.module, kernel);
    if (result != 0) {
      pthread_mutex_unlock(&lock);
      return "kreg_launch: no such kernel in the device module (declare it extern \"C\" __global__)";
    }
    if (bound.cached < kCachedFunctions) {
      bound.names[bound.cached] = kernel;
      bound.functions[bound.cached++] = function;
    }
  }
  LaunchKernel launch = bound.launch;
  pthread_mutex_unlock(&lock);
  int result = launch(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, args,
                      nullptr);
  return result == 0 ? nullptr : driver_error(result, "kreg_launch: cuLaunchKernel failed");
}
