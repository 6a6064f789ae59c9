#include "stable_binding_text.h"

#include <map>
#include <stdexcept>

#include "dtype.h"
#include "stable_binding_outputs.h"

namespace kreg {
namespace {

constexpr const char* kPrologue = R"CPP(// torch's stable ABI from @TARGET@ on, and Python's limited API from 3.10 on:
// no ATen or c10 header, no libtorch_python symbol (tests/test_binding_abi.py).
#define TORCH_TARGET_VERSION (((0ULL + 2) << 56) | ((0ULL + @TARGET_MINOR@) << 48))
#define Py_LIMITED_API 0x030A0000
#include <Python.h>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kreg/abi.h"
#include "kreg/launcher_table.h"

// libstdc++ 13 and later: <iostream>, which torch's stable headers include,
// references std::ios_base_library_init (new in GLIBCXX_3.4.32) so that the
// standard streams exist before a static initializer of this library writes
// to them. None does: std::cerr is written only when a torch call fails, and
// the process's libstdc++, loaded with torch before the binding, has made
// the streams by then. Met here (hidden: nothing outside sees it), the
// reference no longer ties a binding built with g++ 13 to that runtime: it
// loads where the C++ runtime is g++ 12's (GLIBCXX_3.4.30) too.
#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 13
namespace std {
__attribute__((visibility("hidden"))) void ios_base_library_init() {}
}  // namespace std
#endif

// torch's CUDA caching allocator's raw memory (aoti_torch/c/shim.h, declared
// there under USE_CUDA only): weak, so null where torch has none (and never
// called on the CPU).
extern "C" __attribute__((weak)) AOTITorchError aoti_torch_cuda_caching_allocator_raw_alloc(uint64_t nbytes,
                                                                                           void** ret_ptr);
extern "C" __attribute__((weak)) AOTITorchError aoti_torch_cuda_caching_allocator_raw_delete(void* ptr);
@BACKEND_DECLARATIONS@
namespace {

constexpr int kDtypeCount = @DTYPE_COUNT@;
static_assert(kDtypeCount == KREG_TABLE_DTYPE_SLOTS, "kreg/launcher_table.h has a slot per dtype of the table");
constexpr int kMaxArgs = KREG_TABLE_MAX_ARGS;
constexpr int kMaxOutputs = KREG_TABLE_MAX_OUTPUTS;
constexpr int kMaxShapeDims = 64;  // an output's dims: its terms, each up to an argument's dims
constexpr uint64_t kTableMagic = KREG_TABLE_MAGIC;

using DimTerm = kreg_launcher_dim_term;
using OutputDecl = kreg_launcher_output_decl;
using TableRoute = kreg_launcher_route;
using LauncherTable = kreg_launcher_table;

// A failed check: the message alone (STD_TORCH_CHECK would add the file and
// line), raised in Python as the RuntimeError it always was.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw std::runtime_error(out.str());
}
#define KREG_CHECK(cond, ...)             \
  do {                                    \
    if (__builtin_expect(!(cond), 0)) {   \
      fail(__VA_ARGS__);                  \
    }                                     \
  } while (0)

void shim(AOTITorchError error, const char* what) {
  KREG_CHECK(error == AOTI_TORCH_SUCCESS, "kernel registry: torch's ", what, " failed (torch logged why above)");
}

// The dtype table (core/dtype.h), by code: torch's name (as torch prints it),
// the element size, the DLPack type (the fast entry's tensors), and the
// shim's getter of torch's own code.
constexpr const char* kCodeNames[kDtypeCount] = {@CODE_NAMES@};
constexpr int64_t kCodeSizes[kDtypeCount] = {@CODE_SIZES@};
struct DlType {
  uint8_t code, bits;
};
constexpr DlType kCodeDlTypes[kDtypeCount] = {@CODE_DLTYPES@};
using DtypeGetter = int32_t (*)();
const DtypeGetter kCodeGetters[kDtypeCount] = {@CODE_GETTERS@};

// torch's dtype code of each slot, asked once: the codes are torch's to define.
const int32_t* torch_codes() {
  static const std::array<int32_t, kDtypeCount> codes = [] {
    std::array<int32_t, kDtypeCount> c{};
    for (int i = 0; i < kDtypeCount; ++i) c[i] = kCodeGetters[i]();
    return c;
  }();
  return codes.data();
}

int slot_of_torch_code(int32_t code) {
  const int32_t* codes = torch_codes();
  for (int i = 0; i < kDtypeCount; ++i) {
    if (codes[i] == code) return i;
  }
  return -1;
}

// A dtype as torch prints it ("Float"); beyond the table, by c10's ScalarType order.
std::string dtype_text(int32_t code) {
  static const char* const names[] = {
      "Byte",   "Char",     "Short",    "Int",      "Long",     "Half",        "Float",         "Double",
      "ComplexHalf", "ComplexFloat", "ComplexDouble", "Bool", "QInt8", "QUInt8", "QInt32", "BFloat16",
      "QUInt4x2", "QUInt2x4", "Bits1x8", "Bits2x4", "Bits4x2", "Bits8", "Bits16", "Float8_e5m2",
      "Float8_e4m3fn", "Float8_e5m2fnuz", "Float8_e4m3fnuz", "UInt16", "UInt32", "UInt64"};
  const int slot = slot_of_torch_code(code);
  if (slot >= 0) return kCodeNames[slot];
  if (code >= 0 && code < static_cast<int32_t>(std::size(names))) return names[code];
  return "dtype " + std::to_string(code);
}

int32_t cpu_type() {
  static const int32_t type = aoti_torch_device_type_cpu();
  return type;
}
int32_t cuda_type() {
  static const int32_t type = aoti_torch_device_type_cuda();
  return type;
}

// One Tensor argument as the checks see it, from the dispatcher's handle
// (info_of) or from DLPack (fast_entry.cc). sizes and strides are borrowed
// from the tensor, which the caller keeps alive.
struct ArgInfo {
  void* data = nullptr;
  int64_t numel = 0;
  int64_t ndim = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  int32_t torch_dtype = -1;
  int slot = -1;  // the dtype table's, -1 outside it
  int32_t device_type = -1;
  int32_t device_index = -1;
  bool contiguous = false;
  bool defined = false;
};

ArgInfo info_of(AtenTensorHandle h) {
  ArgInfo t;
  shim(aoti_torch_is_defined(h, &t.defined), "aoti_torch_is_defined");
  if (!t.defined) return t;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  shim(aoti_torch_get_data_ptr(h, &t.data), "aoti_torch_get_data_ptr");
  shim(aoti_torch_get_numel(h, &t.numel), "aoti_torch_get_numel");
  shim(aoti_torch_get_dim(h, &t.ndim), "aoti_torch_get_dim");
  shim(aoti_torch_get_sizes(h, &sizes), "aoti_torch_get_sizes");
  shim(aoti_torch_get_strides(h, &strides), "aoti_torch_get_strides");
  shim(aoti_torch_get_dtype(h, &t.torch_dtype), "aoti_torch_get_dtype");
  shim(aoti_torch_get_device_type(h, &t.device_type), "aoti_torch_get_device_type");
  shim(aoti_torch_get_device_index(h, &t.device_index), "aoti_torch_get_device_index");
  shim(aoti_torch_is_contiguous(h, &t.contiguous), "aoti_torch_is_contiguous");
  t.sizes = sizes;
  t.strides = strides;
  t.slot = slot_of_torch_code(t.torch_dtype);
  return t;
}

// "cpu", "cuda:0", as torch prints a device (c10's DeviceType order).
std::string device_text(const ArgInfo& t) {
  static const char* const names[] = {"cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip",
                                      "fpga", "maia", "xla", "vulkan", "metal", "xpu", "mps",
                                      "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone"};
  std::string text = t.device_type >= 0 && t.device_type < static_cast<int32_t>(std::size(names))
                         ? names[t.device_type]
                         : "device type " + std::to_string(t.device_type);
  if (t.device_index >= 0) text += ":" + std::to_string(t.device_index);
  return text;
}

bool same_device(const ArgInfo& a, const ArgInfo& b) {
  return a.device_type == b.device_type && a.device_index == b.device_index;
}

// Sizes or strides as torch prints them: [2, 3].
struct Dims {
  const int64_t* p;
  int64_t n;
};
std::ostream& operator<<(std::ostream& out, const Dims& d) {
  out << "[";
  for (int64_t i = 0; i < d.n; ++i) out << (i ? ", " : "") << d.p[i];
  return out << "]";
}
Dims sizes_of(const ArgInfo& t) { return Dims{t.sizes, t.ndim}; }
Dims strides_of(const ArgInfo& t) { return Dims{t.strides, t.ndim}; }

bool same_sizes(const ArgInfo& a, const ArgInfo& b) {
  return a.ndim == b.ndim && std::equal(a.sizes, a.sizes + a.ndim, b.sizes);
}

kreg_tensor view_of(const ArgInfo& t) {
  return kreg_tensor{t.data, t.numel, t.ndim, t.sizes, t.strides};
}

@OWNED_OUTPUTS@
const LauncherTable& table_at(int64_t address) {
  const auto* table = reinterpret_cast<const LauncherTable*>(address);
  KREG_CHECK(table != nullptr && table->magic == kTableMagic,
             "kernel registry: this op was called with a bad launcher table; "
             "call it through the handle registry.get() returns");
  return *table;
}

// registry.tune's winner for this call: the route whose dtype and shape
// bucket (every dim in (bucket / 2, bucket], 0 for 0) it falls in, else `fallback`.
void* tuned_route(const LauncherTable& table, int slot, const ArgInfo& first, void* fallback) {
  for (int64_t r = 0; r < table.route_count; ++r) {
    const TableRoute& route = table.routes[r];
    if (route.dtype_slot != slot || route.ndims != static_cast<int32_t>(first.ndim)) continue;
    bool inside = true;
    for (int32_t d = 0; d < route.ndims && inside; ++d) {
      const int64_t size = first.sizes[d], bucket = route.bucket[d];
      inside = bucket == 0 ? size == 0 : size > bucket / 2 && size <= bucket;
    }
    if (inside) return route.launcher;
  }
  return fallback;
}

// Checks every Tensor argument (args[i] is null for other arguments and for a
// Tensor? given None), names it, says what to do, and never copies. Returns
// the launcher for the dispatch dtype: that of the first Tensor whose dtype the
// manifest does not fix; *slot is that launcher's dtype code (a float64
// launcher takes float arguments as double, kreg/abi.h). Bit i of
// mutated_mask: argument i is a Tensor(a!), written in place.
void* check_tensors(const LauncherTable& table, const ArgInfo* const* args, const char* const* names, int count,
                    int first_index, int* slot_out, uint64_t mutated_mask) {
  const ArgInfo& first = *args[first_index];
  const char* first_arg = names[first_index];
  const ArgInfo* dispatch = nullptr;
  const char* dispatch_arg = nullptr;
  const ArgInfo* shape_ref = nullptr;
  const char* shape_arg = nullptr;
  for (int i = 0; i < count; ++i) {
    const ArgInfo* p = args[i];
    if (p == nullptr) continue;
    const ArgInfo& t = *p;
    const char* arg = names[i];
    KREG_CHECK(t.defined, table.op_name, ": argument '", arg, "' is an undefined tensor");
    KREG_CHECK(t.device_type == @DEVICE_TYPE@, table.op_name, ": argument '", arg, "' is on ", device_text(t),
               " but this build of the op runs on @DEVICE_WORD@; move it with @MOVE_HINT@ "
               "(the op never copies implicitly)");
    KREG_CHECK(same_device(t, first), table.op_name, ": argument '", arg, "' is on ", device_text(t), " but '",
               first_arg, "' is on ", device_text(first), "; put all tensors on one device");
    const int32_t fixed = table.arg_dtypes[i];
    if (fixed >= 0) {
      KREG_CHECK(t.slot == fixed, table.op_name, ": argument '", arg, "' is ", dtype_text(t.torch_dtype),
                 " but the op takes ", kCodeNames[fixed],
                 "; convert it with .to(dtype) (the op never converts implicitly)");
    } else if (dispatch == nullptr) {
      dispatch = &t;
      dispatch_arg = arg;
    } else {
      KREG_CHECK(t.torch_dtype == dispatch->torch_dtype, table.op_name, ": argument '", arg, "' is ",
                 dtype_text(t.torch_dtype), " but '", dispatch_arg, "' is ", dtype_text(dispatch->torch_dtype),
                 "; convert one of them with .to(dtype) (the op never converts implicitly)");
    }
    // A Tensor(a!) argument is written in place: a contiguous copy would get
    // the result and the caller's tensor would not, so say how to keep it.
    KREG_CHECK(t.contiguous || ((mutated_mask >> i) & 1u), table.op_name, ": argument '", arg,
               "' is not contiguous (sizes ", sizes_of(t), ", strides ", strides_of(t),
               "); pass .contiguous() (the op never copies implicitly)");
    KREG_CHECK(t.contiguous, table.op_name, ": argument '", arg, "' is not contiguous (sizes ", sizes_of(t),
               ", strides ", strides_of(t), ") and is written in place: a .contiguous() copy passed instead "
               "would receive the result, and '", arg, "' would not. Make it contiguous first and pass that "
               "tensor (c = ", arg, ".contiguous(), then the op on c), then copy back with ", arg,
               ".copy_(c), or keep using c");
    if ((table.same_shape_mask >> i) & 1u) {
      if (shape_ref == nullptr) {
        shape_ref = &t;
        shape_arg = arg;
      } else {
        KREG_CHECK(same_sizes(t, *shape_ref), table.op_name, ": argument '", arg, "' has shape ", sizes_of(t),
                   " but '", shape_arg, "' has shape ", sizes_of(*shape_ref));
      }
    }
  }
  if (dispatch == nullptr) {  // every Tensor has a fixed dtype: the one listed launcher
    for (int i = 0; i < kDtypeCount; ++i) {
      *slot_out = i;
      if (table.launchers[i] != nullptr) return table.launchers[i];
    }
    fail(table.op_name, ": no launcher in the table");
  }
  const int slot = dispatch->slot;
  *slot_out = slot;
  void* launcher = slot < 0 ? nullptr : table.launchers[slot];
  KREG_CHECK(launcher != nullptr, table.op_name, ": dtype ", dtype_text(dispatch->torch_dtype),
             " is not supported; the manifest lists ", table.dtypes, " (for '", dispatch_arg, "')");
  if (__builtin_expect(table.route_count > 0, 0)) return tuned_route(table, slot, first, launcher);
  return launcher;
}

@NEW_OUTPUTS@
@DEVICE_HELPERS@
}  // namespace
)CPP";

// The CUDA pieces: the current stream of the inputs' device (its
// cudaStream_t) and a guard on that device, through the shims (no CUDA
// header: a binding builds where only torch's wheels are installed).
constexpr const char* kCudaDeclarations = R"CPP(
// Declared by aoti_torch/c/shim.h under USE_CUDA, defined in libtorch_cuda.
extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index,
                                                                               void** ret_stream);
// aoti_torch/c/shim.h's, which not every torch of the target on has: weak.
extern "C" __attribute__((weak)) AOTITorchError aoti_torch_get_current_device_index(int32_t* ret_device_index);
)CPP";

constexpr const char* kCudaHelpers = R"CPP(void* current_stream(const ArgInfo& first) {
  void* stream = nullptr;
  shim(aoti_torch_get_current_cuda_stream(first.device_index, &stream), "aoti_torch_get_current_cuda_stream");
  return stream;
}

// Switches to the inputs' device for the call, unless it is current already
// (most calls): the shim's guard costs ~1.1 us on an H200
// (bench/stable_shim_costs.py); asking which device is current is one call.
struct DeviceGuard {
  DeviceGuardHandle handle = nullptr;
  explicit DeviceGuard(const ArgInfo& first) {
    int32_t current = -1;
    if (aoti_torch_get_current_device_index != nullptr &&
        aoti_torch_get_current_device_index(&current) == AOTI_TORCH_SUCCESS && current == first.device_index) {
      return;
    }
    shim(aoti_torch_create_device_guard(first.device_index, &handle), "aoti_torch_create_device_guard");
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() {
    if (handle != nullptr) aoti_torch_delete_device_guard(handle);
  }
};
)CPP";

constexpr const char* kCpuHelpers = R"CPP(void* current_stream(const ArgInfo&) { return nullptr; }

struct DeviceGuard {
  explicit DeviceGuard(const ArgInfo&) {}
};
)CPP";

// DLPack's type of each dtype the table names (the fast entry reads tensors
// through torch's DLPack exchange API): {type code, bits}.
const std::map<std::string, std::string>& dlpack_types() {
  static const std::map<std::string, std::string> types = {
      {"float32", "{2, 32}"}, {"float16", "{2, 16}"}, {"bfloat16", "{4, 16}"}, {"float64", "{2, 64}"},
      {"int8", "{0, 8}"},     {"int16", "{0, 16}"},   {"int32", "{0, 32}"},    {"int64", "{0, 64}"},
      {"uint8", "{1, 8}"},    {"bool", "{6, 8}"},     {"float8_e4m3fn", "{10, 8}"}, {"float8_e5m2", "{12, 8}"}};
  return types;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string stable_prologue(const std::string& backend) {
  if (backend != "cpu" && backend != "cuda") {
    throw std::invalid_argument("stable_prologue: backend must be cpu or cuda, not " + backend);
  }
  const bool cuda = backend == "cuda";
  std::string names, sizes, dltypes, getters;
  for (const DtypeInfo& d : dtype_table()) {
    const auto dl = dlpack_types().find(d.name);
    if (dl == dlpack_types().end()) {
      throw std::logic_error(std::string("stable_prologue: no DLPack type for dtype ") + d.name);
    }
    const std::string sep = names.empty() ? "" : ", ";
    names += sep + "\"" + d.scalar_type + "\"";
    sizes += sep + std::to_string(d.element_size);
    dltypes += sep + dl->second;
    getters += sep + "&aoti_torch_dtype_" + d.name;
  }
  std::string text = kPrologue;
  // The outputs' pieces first: the placeholders below reach into them too.
  replace_all(text, "@OWNED_OUTPUTS@", stable_outputs::kOwned);
  replace_all(text, "@NEW_OUTPUTS@", stable_outputs::kNew);
  const std::string target = kStableTargetTorch;
  replace_all(text, "@TARGET@", target);
  replace_all(text, "@TARGET_MINOR@", target.substr(target.find('.') + 1));
  replace_all(text, "@DTYPE_COUNT@", std::to_string(dtype_table().size()));
  replace_all(text, "@CODE_NAMES@", names);
  replace_all(text, "@CODE_SIZES@", sizes);
  replace_all(text, "@CODE_DLTYPES@", dltypes);
  replace_all(text, "@CODE_GETTERS@", getters);
  replace_all(text, "@BACKEND_DECLARATIONS@", cuda ? kCudaDeclarations : "");
  replace_all(text, "@SHARED_OUTPUT@", cuda ? "" : stable_outputs::kCpuShared);
  replace_all(text, "@DEVICE_HELPERS@", cuda ? kCudaHelpers : kCpuHelpers);
  replace_all(text, "@DEVICE_TYPE@", cuda ? "cuda_type()" : "cpu_type()");
  replace_all(text, "@DEVICE_WORD@", cuda ? "CUDA" : "the CPU");
  replace_all(text, "@MOVE_HINT@", cuda ? ".cuda()" : ".cpu()");
  return text;
}

}  // namespace kreg
