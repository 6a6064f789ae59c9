// The launch API (kreg/launch.h) inside a launcher library: compiled into
// every kernel library whose device code is a cubin (NVRTC, nvcc -cubin). It
// holds the bound cubin, its module per device (loaded on the first launch on
// each) and the driver's entry points, handed over by the registry
// (registry/device/driver_module.py) through kreg_bind_device_module, so the library
// needs neither CUDA headers nor libcuda at link time.
//
// The bound image is one cubin, or several back to back, each at an 8-byte
// aligned offset (registry/device/module_images.py writes them: a linked
// kernel's kernels, linked one per module side by side). A kernel is looked
// up in each module in turn; a module is loaded on the first lookup that
// reaches it.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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
using FuncSetAttribute = int (*)(void* function, int attribute, int value);

// cuLaunchKernelEx's configuration, laid out as cuda.h's CUlaunchConfig and
// CUlaunchAttribute (a 4-byte id, padding to 8, a 64-byte value union).
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void* stream;
  LaunchAttribute* attrs;
  unsigned num_attrs;
};
using LaunchKernelEx = int (*)(const LaunchConfig* config, void* function, void** params, void** extra);

constexpr int kMaxDynamicSharedSizeBytes = 8;        // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kNonPortableClusterSizeAllowed = 14;   // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
constexpr int kLaunchAttributeClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
constexpr unsigned kDefaultDynamicShared = 48 * 1024;  // what a kernel may use without raising its limit
constexpr unsigned kPortableClusterSize = 8;

constexpr int kCachedFunctions = 32;
constexpr int kMaxDevices = 64;
constexpr int kMaxModules = 16;  // module_images.py's MAX_MODULES

// A module belongs to the context it was loaded in: one per device (its
// primary context, torch's), loaded on the first launch there, with the
// functions looked up in it.
struct DeviceModule {
  void* modules[kMaxModules] = {};
  const char* names[kCachedFunctions] = {};
  void* functions[kCachedFunctions] = {};
  // What was set on each function: its dynamic shared memory limit (bytes),
  // and whether it may run non-portable cluster sizes. Set once, not per launch.
  unsigned shared_limit[kCachedFunctions] = {};
  bool non_portable[kCachedFunctions] = {};
  int cached = 0;
};

struct Bound {
  const void* image = nullptr;  // the cubin's bytes, kept alive by the registry
  const void* images[kMaxModules] = {};  // where each cubin of the image starts
  int image_count = 0;
  GetFunction get_function = nullptr;
  LaunchKernel launch = nullptr;
  ErrorString error_string = nullptr;
  CtxGetDevice ctx_get_device = nullptr;
  ModuleLoadData module_load_data = nullptr;
  FuncSetAttribute func_set_attribute = nullptr;
  LaunchKernelEx launch_ex = nullptr;  // null with a driver before CUDA 11.8
  DeviceModule devices[kMaxDevices];
};

Bound bound;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

const char* driver_error(int result, const char* fallback) {
  const char* text = nullptr;
  if (bound.error_string != nullptr && bound.error_string(result, &text) == 0 && text != nullptr) return text;
  return fallback;
}

// Messages that name the kernel and the value: one per thread, valid until
// its next launch (the binding copies it into the exception at once).
thread_local char message[512];

const char* failed(const char* kernel, const char* what) {
  snprintf(message, sizeof message, "kreg_launch(\"%s\"): %s", kernel, what);
  return message;
}

const char* failed_driver(const char* kernel, const char* call, int result, const char* hint) {
  snprintf(message, sizeof message, "kreg_launch(\"%s\"): %s failed: %s%s", kernel, call,
           driver_error(result, "unknown driver error"), hint);
  return message;
}

// The function `kernel` of the current device's module, with what was set on
// it (null when it is beyond the cache). Called under `lock`.
struct Found {
  void* function = nullptr;
  unsigned* shared_limit = nullptr;
  bool* non_portable = nullptr;
  const char* error = nullptr;
};

Found find_function(const char* kernel) {
  Found found;
  if (bound.image == nullptr) {
    found.error = "no device module is bound to this launcher library (the registry binds it on get)";
    return found;
  }
  // The device of the current context: the binding made the inputs' device
  // current (a device guard), so a call on another GPU launches from that
  // GPU's module, never from another context's.
  int device = -1;
  int result = bound.ctx_get_device(&device);
  if (result != 0 || device < 0 || device >= kMaxDevices) {
    found.error = result != 0 ? "kreg_launch: no CUDA context is current on this thread (cuCtxGetDevice failed)"
                              : "kreg_launch: the current CUDA device is beyond the 64 the launcher library serves";
    return found;
  }
  DeviceModule& here = bound.devices[device];
  for (int i = 0; i < here.cached; ++i) {
    if (strcmp(here.names[i], kernel) == 0) {
      found.function = here.functions[i];
      found.shared_limit = &here.shared_limit[i];
      found.non_portable = &here.non_portable[i];
      return found;
    }
  }
  for (int m = 0; m < bound.image_count && found.function == nullptr; ++m) {
    if (here.modules[m] == nullptr) {
      result = bound.module_load_data(&here.modules[m], bound.images[m]);
      if (result != 0) {
        here.modules[m] = nullptr;
        found.error = driver_error(result, "kreg_launch: cuModuleLoadData failed for the current device");
        return found;
      }
    }
    if (bound.get_function(&found.function, here.modules[m], kernel) != 0) found.function = nullptr;
  }
  if (found.function == nullptr) {
    found.error = failed(kernel, "no such kernel in the device module (declare it extern \"C\" __global__; "
                                 "where the manifest has [cuda] kernels_used, list it there too)");
    return found;
  }
  if (here.cached < kCachedFunctions) {
    here.names[here.cached] = kernel;
    here.functions[here.cached] = found.function;
    found.shared_limit = &here.shared_limit[here.cached];
    found.non_portable = &here.non_portable[here.cached];
    ++here.cached;
  }
  return found;
}

// Raises the kernel's dynamic shared memory limit to `bytes` where the
// default does not cover it and no earlier launch set as much. Under `lock`.
const char* allow_shared(const char* kernel, const Found& found, unsigned bytes) {
  if (bytes <= kDefaultDynamicShared || (found.shared_limit != nullptr && *found.shared_limit >= bytes)) {
    return nullptr;
  }
  int result = bound.func_set_attribute(found.function, kMaxDynamicSharedSizeBytes, static_cast<int>(bytes));
  if (result != 0) {
    char call[128];
    snprintf(call, sizeof call, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %u)", bytes);
    return failed_driver(kernel, call, result,
                         " (more dynamic shared memory than the device allows a block, less the kernel's static "
                         "shared memory: 227 KB on an H100/H200)");
  }
  if (found.shared_limit != nullptr) *found.shared_limit = bytes;
  return nullptr;
}

// Where each cubin of `image` (`size` bytes) starts: the first at 0, each
// next at the first 8-byte boundary past the end of the one before (the end
// of its ELF section table, program headers or last section with contents).
// Anything else there ends the list.
int split_images(const unsigned char* image, size_t size, const void** starts) {
  int count = 0;
  size_t at = 0;
  while (count < kMaxModules && at + 64 <= size && memcmp(image + at, "\x7f" "ELF\x02\x01", 6) == 0) {
    starts[count++] = image + at;
    const unsigned char* elf = image + at;
    uint64_t phoff, shoff;
    uint16_t phentsize, phnum, shentsize, shnum;
    memcpy(&phoff, elf + 0x20, 8);
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&phentsize, elf + 0x36, 2);
    memcpy(&phnum, elf + 0x38, 2);
    memcpy(&shentsize, elf + 0x3A, 2);
    memcpy(&shnum, elf + 0x3C, 2);
    uint64_t end = 64;  // the ELF header itself
    if (phoff + uint64_t(phentsize) * phnum > end) end = phoff + uint64_t(phentsize) * phnum;
    if (shoff + uint64_t(shentsize) * shnum > end) end = shoff + uint64_t(shentsize) * shnum;
    for (uint16_t i = 0; i < shnum && shoff + uint64_t(i + 1) * shentsize <= size - at; ++i) {
      const unsigned char* section = elf + shoff + uint64_t(i) * shentsize;
      uint32_t type;
      uint64_t offset, bytes;
      memcpy(&type, section + 4, 4);
      memcpy(&offset, section + 0x18, 8);
      memcpy(&bytes, section + 0x20, 8);
      if (type != 8 /* SHT_NOBITS */ && offset + bytes > end) end = offset + bytes;
    }
    at += (end + 7) & ~uint64_t(7);
  }
  return count;
}

}  // namespace

// Binds a new image (`image`, `size` bytes, kept alive by the caller: one
// cubin or several, split_images) with the module the registry loaded from
// it for `device` (its first cubin's; null: none loaded yet); other modules
// and devices load theirs on first use. Modules of the previous image stay
// loaded (never unloaded: an old graph may launch from them) but are no
// longer used.
extern "C" __attribute__((visibility("default"))) void kreg_bind_device_module(
    const void* image, size_t size, void* module, int device, void* get_function, void* launch,
    void* error_string, void* ctx_get_device, void* module_load_data, void* func_set_attribute, void* launch_ex) {
  pthread_mutex_lock(&lock);
  bound.image = image;
  bound.image_count = split_images(static_cast<const unsigned char*>(image), size, bound.images);
  if (bound.image_count == 0) {  // not ELF (a PTX or fatbin image): the driver reads it whole
    bound.images[0] = image;
    bound.image_count = 1;
  }
  bound.get_function = reinterpret_cast<GetFunction>(get_function);
  bound.launch = reinterpret_cast<LaunchKernel>(launch);
  bound.error_string = reinterpret_cast<ErrorString>(error_string);
  bound.ctx_get_device = reinterpret_cast<CtxGetDevice>(ctx_get_device);
  bound.module_load_data = reinterpret_cast<ModuleLoadData>(module_load_data);
  bound.func_set_attribute = reinterpret_cast<FuncSetAttribute>(func_set_attribute);
  bound.launch_ex = reinterpret_cast<LaunchKernelEx>(launch_ex);
  for (DeviceModule& d : bound.devices) d = DeviceModule{};
  if (device >= 0 && device < kMaxDevices) bound.devices[device].modules[0] = module;
  pthread_mutex_unlock(&lock);
}

extern "C" const char* kreg_launch(const char* kernel, kreg_dim3 grid, kreg_dim3 block, unsigned shared_bytes,
                                   void* stream, void** args) {
  pthread_mutex_lock(&lock);
  Found found = find_function(kernel);
  const char* error = found.error != nullptr ? found.error : allow_shared(kernel, found, shared_bytes);
  LaunchKernel launch = bound.launch;
  pthread_mutex_unlock(&lock);
  if (error != nullptr) return error;
  int result = launch(found.function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream,
                      args, nullptr);
  if (result == 0) return nullptr;
  char call[160];
  snprintf(call, sizeof call, "cuLaunchKernel(grid %ux%ux%u, block %ux%ux%u, %u bytes of shared memory)", grid.x,
           grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
  return failed_driver(kernel, call, result, "");
}

extern "C" const char* kreg_launch_cluster(const char* kernel, kreg_dim3 grid, kreg_dim3 block, kreg_dim3 cluster,
                                           unsigned shared_bytes, void* stream, void** args) {
  const unsigned blocks = cluster.x * cluster.y * cluster.z;
  if (blocks <= 1) return kreg_launch(kernel, grid, block, shared_bytes, stream, args);
  if (cluster.x == 0 || cluster.y == 0 || cluster.z == 0 || grid.x % cluster.x || grid.y % cluster.y ||
      grid.z % cluster.z) {
    snprintf(message, sizeof message,
             "kreg_launch_cluster(\"%s\"): the grid %ux%ux%u is not a multiple of the cluster %ux%ux%u in "
             "each dimension; round the grid up to whole clusters",
             kernel, grid.x, grid.y, grid.z, cluster.x, cluster.y, cluster.z);
    return message;
  }
  pthread_mutex_lock(&lock);
  Found found = find_function(kernel);
  const char* error = found.error != nullptr ? found.error : allow_shared(kernel, found, shared_bytes);
  if (error == nullptr && bound.launch_ex == nullptr) {
    error = failed(kernel, "clusters need cuLaunchKernelEx, which this CUDA driver lacks (before 11.8); update it");
  }
  if (error == nullptr && blocks > kPortableClusterSize &&
      (found.non_portable == nullptr || !*found.non_portable)) {
    int result = bound.func_set_attribute(found.function, kNonPortableClusterSizeAllowed, 1);
    if (result != 0) {
      error = failed_driver(kernel, "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)", result,
                            " (a cluster of more than 8 blocks needs sm_90 or later)");
    } else if (found.non_portable != nullptr) {
      *found.non_portable = true;
    }
  }
  LaunchKernelEx launch_ex = bound.launch_ex;
  pthread_mutex_unlock(&lock);
  if (error != nullptr) return error;
  LaunchAttribute attribute = {};
  attribute.id = kLaunchAttributeClusterDimension;
  attribute.value.cluster.x = cluster.x;
  attribute.value.cluster.y = cluster.y;
  attribute.value.cluster.z = cluster.z;
  LaunchConfig config = {grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, &attribute, 1};
  int result = launch_ex(&config, found.function, args, nullptr);
  if (result == 0) return nullptr;
  char call[192];
  snprintf(call, sizeof call,
           "cuLaunchKernelEx(grid %ux%ux%u, block %ux%ux%u, cluster %ux%ux%u, %u bytes of shared memory)", grid.x,
           grid.y, grid.z, block.x, block.y, block.z, cluster.x, cluster.y, cluster.z, shared_bytes);
  return failed_driver(kernel, call, result,
                       " (a cluster needs sm_90 or later, at most 8 blocks portably, 16 on an H100/H200)");
}
