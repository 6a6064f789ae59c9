#include "binding_text.h"

#include <sstream>
#include <stdexcept>

#include "dtype.h"
#include "launcher_header.h"  // scalar_c_type: float or double per launcher dtype

namespace kreg {
namespace {

// The CPU output: for an isolated op's table (registry/isolation/proxy.py), a
// large one comes from the shared output pool (core/shared_output_pool.h),
// which its worker maps, so the launcher writes it in place and nothing is
// copied back; otherwise, and if the pool has none, the CPU allocator.
constexpr const char* kCpuNewOutput = R"CPP(if (C10_UNLIKELY(table.shared_output_allocate != nullptr)) {
    const int64_t nbytes = c10::multiply_integers(shape) * static_cast<int64_t>(c10::elementSize(dtype));
    void* data = table.shared_output_allocate(nbytes);  // null below the pool's minimum
    if (data != nullptr) {
      return at::from_blob(data, shape, [release = table.shared_output_release](void* p) { release(p); },
                           at::TensorOptions().dtype(dtype).device(c10::kCPU));
    }
  }
  return at::detail::empty_cpu(shape, dtype, /*pin_memory=*/false, std::nullopt);)CPP";

// The fixed part of every AOT unit, over constant launcher tables in the
// layout of kreg/launcher_table.h (generated code includes no core header).
constexpr const char* kPrologueHead = R"CPP(#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>
@BACKEND_INCLUDES@
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "kreg/abi.h"
#include "kreg/launcher_table.h"

namespace {

constexpr int kDtypeCount = @DTYPE_COUNT@;
static_assert(kDtypeCount == KREG_TABLE_DTYPE_SLOTS, "kreg/launcher_table.h has a slot per dtype of the table");
constexpr int kMaxArgs = KREG_TABLE_MAX_ARGS;
constexpr int kMaxOutputs = KREG_TABLE_MAX_OUTPUTS;
constexpr int kMaxOutputDims = KREG_TABLE_MAX_OUTPUT_DIMS;
constexpr uint64_t kTableMagic = KREG_TABLE_MAGIC;

using DimTerm = kreg_launcher_dim_term;
using OutputDecl = kreg_launcher_output_decl;
using TableRoute = kreg_launcher_route;
using LauncherTable = kreg_launcher_table;

// The dtype table (core/dtype.h), by code.
constexpr c10::ScalarType kCodeTypes[kDtypeCount] = {@CODE_TYPES@};

int dtype_slot(c10::ScalarType t) {
  for (int i = 0; i < kDtypeCount; ++i) {
    if (kCodeTypes[i] == t) return i;
  }
  return -1;
}

kreg_tensor view_of(const at::Tensor& t) {
  return kreg_tensor{t.data_ptr(), t.numel(), t.dim(), t.sizes().data(), t.strides().data()};
}

// A Tensor? argument: None is data NULL, ndim -1.
kreg_tensor view_of(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return kreg_tensor{nullptr, 0, -1, nullptr, nullptr};
  return view_of(*t);
}

kreg_int_list list_of(c10::IntArrayRef values) {
  return kreg_int_list{values.data(), static_cast<int64_t>(values.size())};
}

int32_t code_of(const LauncherTable& table, const std::optional<c10::ScalarType>& t, const char* arg) {
  if (!t.has_value()) return -1;
  const int code = dtype_slot(*t);
  TORCH_CHECK(code >= 0, table.op_name, ": argument '", arg, "' is ", *t,
              ", which kernels cannot be told about (see registry/core/dtype.h)");
  return code;
}

const at::Tensor* tensor_ptr(const at::Tensor& t) { return &t; }
const at::Tensor* tensor_ptr(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? &*t : nullptr;
}
)CPP";

constexpr const char* kChecks = R"CPP(
// registry.tune's winner for this call: the route whose dtype and shape
// bucket (every dim in (bucket / 2, bucket], 0 for 0) it falls in, else `fallback`.
void* tuned_route(const LauncherTable& table, int slot, const at::Tensor& first, void* fallback) {
  const c10::IntArrayRef sizes = first.sizes();
  for (int64_t r = 0; r < table.route_count; ++r) {
    const TableRoute& route = table.routes[r];
    if (route.dtype_slot != slot || route.ndims != static_cast<int32_t>(sizes.size())) continue;
    bool inside = true;
    for (int32_t d = 0; d < route.ndims && inside; ++d) {
      const int64_t size = sizes[d], bucket = route.bucket[d];
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
void* check_tensors(const LauncherTable& table, const at::Tensor* const* args, const char* const* names,
                    int count, int first_index, int* slot_out, uint64_t mutated_mask) {
  const at::Tensor& first = *args[first_index];
  const char* first_arg = names[first_index];
  const at::Tensor* dispatch = nullptr;
  const char* dispatch_arg = nullptr;
  const at::Tensor* shape_ref = nullptr;
  const char* shape_arg = nullptr;
  for (int i = 0; i < count; ++i) {
    const at::Tensor* p = args[i];
    if (p == nullptr) continue;
    const at::Tensor& t = *p;
    const char* arg = names[i];
    TORCH_CHECK(t.defined(), table.op_name, ": argument '", arg, "' is an undefined tensor");
    TORCH_CHECK(@DEVICE_TEST@, table.op_name, ": argument '", arg, "' is on ", t.device(),
                " but this build of the op runs on @DEVICE_WORD@; move it with @MOVE_HINT@ "
                "(the op never copies implicitly)");
    TORCH_CHECK(t.device() == first.device(), table.op_name, ": argument '", arg, "' is on ",
                t.device(), " but '", first_arg, "' is on ", first.device(),
                "; put all tensors on one device");
    const int32_t fixed = table.arg_dtypes[i];
    if (fixed >= 0) {
      TORCH_CHECK(t.scalar_type() == kCodeTypes[fixed], table.op_name, ": argument '", arg, "' is ",
                  t.scalar_type(), " but the op takes ", kCodeTypes[fixed],
                  "; convert it with .to(dtype) (the op never converts implicitly)");
    } else if (dispatch == nullptr) {
      dispatch = &t;
      dispatch_arg = arg;
    } else {
      TORCH_CHECK(t.scalar_type() == dispatch->scalar_type(), table.op_name, ": argument '", arg,
                  "' is ", t.scalar_type(), " but '", dispatch_arg, "' is ", dispatch->scalar_type(),
                  "; convert one of them with .to(dtype) (the op never converts implicitly)");
    }
    // A Tensor(a!) argument is written in place: a contiguous copy would get
    // the result and the caller's tensor would not, so say how to keep it.
    TORCH_CHECK(t.is_contiguous() || ((mutated_mask >> i) & 1u), table.op_name, ": argument '", arg,
                "' is not contiguous (sizes ", t.sizes(), ", strides ", t.strides(),
                "); pass .contiguous() (the op never copies implicitly)");
    TORCH_CHECK(t.is_contiguous(), table.op_name, ": argument '", arg, "' is not contiguous (sizes ", t.sizes(),
                ", strides ", t.strides(), ") and is written in place: a .contiguous() copy passed instead "
                "would receive the result, and '", arg, "' would not. Make it contiguous first and pass that "
                "tensor (c = ", arg, ".contiguous(), then the op on c), then copy back with ", arg,
                ".copy_(c), or keep using c");
    if ((table.same_shape_mask >> i) & 1u) {
      if (shape_ref == nullptr) {
        shape_ref = &t;
        shape_arg = arg;
      } else {
        TORCH_CHECK(t.sizes() == shape_ref->sizes(), table.op_name, ": argument '", arg, "' has shape ",
                    t.sizes(), " but '", shape_arg, "' has shape ", shape_ref->sizes());
      }
    }
  }
  if (dispatch == nullptr) {  // every Tensor has a fixed dtype: the one listed launcher
    for (int i = 0; i < kDtypeCount; ++i) {
      *slot_out = i;
      if (table.launchers[i] != nullptr) return table.launchers[i];
    }
    TORCH_CHECK(false, table.op_name, ": no launcher in the table");
  }
  const int slot = dtype_slot(dispatch->scalar_type());
  *slot_out = slot;
  void* launcher = slot < 0 ? nullptr : table.launchers[slot];
  TORCH_CHECK(launcher != nullptr, table.op_name, ": dtype ", dispatch->scalar_type(),
              " is not supported; the manifest lists ", table.dtypes, " (for '", dispatch_arg, "')");
  if (C10_UNLIKELY(table.route_count > 0)) return tuned_route(table, slot, first, launcher);
  return launcher;
}

// A new output tensor on the device of `first` (the caller holds a guard on
// it), straight from the device's allocator as torch's own kernels make
// theirs: at::empty reaches the same allocator through the dispatcher
// (BackendSelect, then the backend's empty op), a fixed cost on every output
// of every call that a one-element op feels. at::empty stays where it does
// more: with torch.use_deterministic_algorithms and
// torch.utils.deterministic.fill_uninitialized_memory on, it fills new memory
// (NaN), so that an output a launcher leaves unwritten shows.
at::Tensor new_output(const LauncherTable& table, c10::IntArrayRef shape, c10::ScalarType dtype,
                      const at::Tensor& first) {
  const at::Context& context = at::globalContext();
  if (C10_UNLIKELY(context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory())) {
    return at::empty(shape, first.options().dtype(dtype));
  }
  @NEW_OUTPUT@
}

// Output k, allocated from its declaration on the device of `first`.
at::Tensor allocate(const LauncherTable& table, int k, const at::Tensor* const* args, const at::Tensor& first) {
  const OutputDecl& decl = table.outputs[k];
  c10::SmallVector<int64_t, kMaxOutputDims> shape;
  for (int j = 0; j < decl.ndims; ++j) {
    const DimTerm& term = decl.dims[j];
    if (term.kind == 0) {
      shape.push_back(term.a);
      continue;
    }
    const at::IntArrayRef sizes = args[term.arg]->sizes();
    const int64_t n = static_cast<int64_t>(sizes.size());
    if (term.kind == 1) {
      const int64_t d = term.a < 0 ? term.a + n : term.a;
      TORCH_CHECK(d >= 0 && d < n, table.op_name, ": output ", k, " takes dim ", term.a,
                  " of an argument with ", n, " dims (shape ", sizes, ")");
      shape.push_back(sizes[d]);
    } else {
      auto clamp = [n](int64_t v) { return v < 0 ? std::max<int64_t>(0, v + n) : std::min(v, n); };
      const int64_t start = clamp(term.a), stop = term.b == INT64_MAX ? n : clamp(term.b);
      for (int64_t d = start; d < stop; ++d) shape.push_back(sizes[d]);
    }
  }
  const c10::ScalarType dtype =
      decl.dtype_code >= 0 ? kCodeTypes[decl.dtype_code] : args[decl.dtype_arg]->scalar_type();
  return new_output(table, shape, dtype, first);
}

}  // namespace
)CPP";

const char* device_test(const std::string& backend) {
  return backend == "cuda" ? "t.is_cuda()" : "t.is_cpu()";
}

std::string c_type(const Arg& arg) {
  switch (arg.type) {
    case ArgType::kTensor: return arg.optional ? "const std::optional<at::Tensor>&" : "const at::Tensor&";
    case ArgType::kFloat: return "double";
    case ArgType::kInt: return "int64_t";
    case ArgType::kBool: return "bool";
    case ArgType::kIntList: return "c10::IntArrayRef";
    case ArgType::kScalarType: return "std::optional<c10::ScalarType>";
  }
  return "";
}

std::string launcher_arg(const Arg& arg, bool wide) {
  switch (arg.type) {
    case ArgType::kTensor: return "view_of(" + arg.name + ")";
    // Python floats arrive as double; a float64 launcher takes them as they are,
    // every other launcher as float, narrowed here, once (scalar_c_type).
    case ArgType::kFloat: return wide ? arg.name : "static_cast<float>(" + arg.name + ")";
    case ArgType::kIntList: return "list_of(" + arg.name + ")";
    case ArgType::kScalarType: return "code_of(table, " + arg.name + ", \"" + arg.name + "\")";
    default: return arg.name;
  }
}

// Bit i: argument i is a Tensor(a!) (check_tensors' contiguity advice).
uint64_t mutated_mask(const Signature& signature) {
  uint64_t mask = 0;
  for (size_t i = 0; i < signature.args.size(); ++i) {
    if (signature.args[i].mutated) mask |= uint64_t{1} << i;
  }
  return mask;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

// The pieces the AOT registration units (codegen_aot.cc) check, allocate and
// launch with.
namespace binding_text {

std::string prologue(const std::string& backend) {
  const bool cuda = backend == "cuda";
  std::string text = std::string(kPrologueHead) + kChecks;
  std::string code_types;
  for (const DtypeInfo& d : dtype_table()) {
    code_types += (code_types.empty() ? "" : ", ") + std::string("c10::ScalarType::") + d.scalar_type;
  }
  replace_all(text, "@DTYPE_COUNT@", std::to_string(dtype_table().size()));
  replace_all(text, "@CODE_TYPES@", code_types);
  // CUDA through c10's device-generic guard and stream (the CUDA ones torch
  // registers), not c10/cuda/*: those include cuda_runtime.h, which torch's
  // nvidia wheels cannot compile for the host (no crt/ headers). So a binding
  // builds where only the wheels are installed, like the NVRTC path.
  replace_all(text, "@BACKEND_INCLUDES@",
              cuda ? "#include <ATen/detail/CUDAHooksInterface.h>\n#include <c10/core/DeviceGuard.h>\n"
                     "#include <c10/core/impl/DeviceGuardImplInterface.h>"
                   : "");
  // The allocator torch's CUDA ops use (a pluggable one included), reached
  // through the CUDA hooks, which need no CUDA header; as at::detail::empty_cuda.
  replace_all(text, "@NEW_OUTPUT@",
              cuda ? "return at::detail::empty_generic(shape, at::detail::getCUDAHooks().getCUDADeviceAllocator(),\n"
                     "                                   c10::DispatchKeySet(c10::DispatchKey::CUDA), dtype, std::nullopt);"
                   : kCpuNewOutput);
  replace_all(text, "@DEVICE_TEST@", device_test(backend));
  replace_all(text, "@DEVICE_WORD@", cuda ? "CUDA" : "the CPU");
  replace_all(text, "@MOVE_HINT@", cuda ? ".cuda()" : ".cpu()");
  return text;
}

const Arg& first_tensor(const Signature& signature, const std::string& caller) {
  const int first = signature.first_tensor();
  if (first < 0) throw std::invalid_argument(caller + ": signature has no Tensor argument that is not optional");
  return signature.args[first];
}

std::string cpp_params(const Signature& signature) {
  std::string text;
  for (const Arg& arg : signature.args) {
    text += (text.empty() ? "" : ", ") + c_type(arg) + " " + arg.name;
  }
  return text;
}

std::string schema_params(const Signature& signature) {
  // Positional and without defaults: the JIT op's caller (registry/op.py)
  // passes every argument. (torch.library ops use canonical() instead.)
  std::string text;
  for (const Arg& arg : signature.args) {
    text += (text.empty() ? "" : ", ") + arg.type_text() + " " + arg.name;
  }
  return text;
}

std::string schema_returns(const Signature& signature) {
  if (signature.returns.size() == 1) return "Tensor";
  std::string text;
  for (size_t i = 0; i < signature.returns.size(); ++i) text += i ? ", Tensor" : "Tensor";
  return "(" + text + ")";
}

std::string cpp_return_type(const Signature& signature) {
  const size_t n = signature.returns.size();
  if (n == 0) return "void";
  if (n == 1) return "at::Tensor";
  std::string text = "std::tuple<";
  for (size_t i = 0; i < n; ++i) text += i ? ", at::Tensor" : "at::Tensor";
  return text + ">";
}

std::string launcher_params(const Signature& signature, const std::string& dtype) {
  // Each return, every argument in order, then the stream (core/launcher_header.h).
  std::string text;
  for (size_t i = 0; i < signature.returns.size(); ++i) text += "kreg_tensor, ";
  for (const Arg& arg : signature.args) {
    switch (arg.type) {
      case ArgType::kTensor: text += "kreg_tensor, "; break;
      case ArgType::kFloat: text += scalar_c_type(dtype) + ", "; break;
      case ArgType::kInt: text += "int64_t, "; break;
      case ArgType::kBool: text += "bool, "; break;
      case ArgType::kIntList: text += "kreg_int_list, "; break;
      case ArgType::kScalarType: text += "int32_t, "; break;
    }
  }
  return text + "void*";
}

std::string checks_and_call(const Signature& signature, const std::string& backend,
                            const std::string& launcher_type) {
  const bool cuda = backend == "cuda";
  const Arg& first = first_tensor(signature, "checks_and_call");
  const size_t n = signature.args.size();
  std::ostringstream out;
  out << "  const at::Tensor* kreg_args[" << n << "] = {";
  for (size_t i = 0; i < n; ++i) {
    const Arg& arg = signature.args[i];
    out << (i ? ", " : "") << (arg.is_tensor() ? "tensor_ptr(" + arg.name + ")" : std::string("nullptr"));
  }
  out << "};\n  const char* const kreg_names[" << n << "] = {";
  for (size_t i = 0; i < n; ++i) out << (i ? ", " : "") << "\"" << signature.args[i].name << "\"";
  out << "};\n"
      << "  int kreg_slot = -1;\n"
      << "  void* launcher = check_tensors(table, kreg_args, kreg_names, " << n << ", "
      << signature.first_tensor() << ", &kreg_slot, " << mutated_mask(signature) << "ull);\n";
  if (cuda) out << "  const c10::DeviceGuard device_guard(" << first.name << ".device());\n";
  std::string written;  // the tensors the launcher writes: nothing to do when all are empty
  for (size_t k = 0; k < signature.returns.size(); ++k) {
    out << "  at::Tensor kreg_out" << k << " = allocate(table, " << k << ", kreg_args, " << first.name << ");\n";
    written += (written.empty() ? "" : " && ") + std::string("kreg_out") + std::to_string(k) + ".numel() == 0";
  }
  for (const Arg& arg : signature.args) {
    if (arg.mutated) written += (written.empty() ? "" : " && ") + arg.name + ".numel() == 0";
  }
  std::string result;
  if (signature.returns.size() == 1) {
    result = "kreg_out0";
  } else if (signature.returns.size() > 1) {
    result = "{";
    for (size_t k = 0; k < signature.returns.size(); ++k) result += (k ? ", kreg_out" : "kreg_out") + std::to_string(k);
    result += "}";
  }
  const std::string ret = result.empty() ? "return;" : "return " + result + ";";
  if (!written.empty()) out << "  if (" << written << ") " << ret << "\n";
  if (cuda) {
    // The current stream of the input's device; native_handle() is its cudaStream_t.
    out << "  void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(" << first.name
        << ".device()).native_handle();\n";
  } else {
    out << "  void* stream = nullptr;\n";
  }
  auto launch = [&](const std::string& type, bool wide) {
    out << "reinterpret_cast<" << type << ">(launcher)(";
    for (size_t k = 0; k < signature.returns.size(); ++k) out << "view_of(kreg_out" << k << "), ";
    for (const Arg& arg : signature.args) out << launcher_arg(arg, wide) << ", ";
    out << "stream)";
  };
  bool has_float = false;
  for (const Arg& arg : signature.args) has_float = has_float || arg.type == ArgType::kFloat;
  out << "  const char* error = ";
  if (has_float) {  // a float64 launcher takes the float arguments as double (kreg/abi.h)
    out << "kreg_slot == " << dtype_code("float64") << "\n      ? ";
    launch("const char* (*)(" + binding_text::launcher_params(signature, "float64") + ")", true);
    out << "\n      : ";
  }
  launch(launcher_type, false);
  out << ";\n"
      << "  TORCH_CHECK(error == nullptr, table.op_name, \": the launcher failed: \", error);\n"
      << "  " << ret << "\n}\n";
  return out.str();
}

}  // namespace binding_text

}  // namespace kreg
