#include "codegen.h"

#include <sstream>
#include <stdexcept>

#include "codegen_aot.h"  // declares binding_text: the pieces the AOT generator shares

namespace kreg {
namespace {

// The fixed part of every binding. The launcher table is filled in by the
// Python driver (registry/launchers.py mirrors this struct) and passed to the
// op as an integer, so one compiled binding serves any number of kernels and
// kernel versions that share a signature. (Three pieces: the AOT units of
// codegen_aot.cc use the head and the checks, with constant tables.)
constexpr const char* kPrologueHead = R"CPP(#include <ATen/ops/empty_like.h>
#include <torch/library.h>
@BACKEND_INCLUDES@
#include <cstdint>

#include "kreg/abi.h"

namespace {

struct LauncherTable {
  uint64_t magic;
  const char* op_name;
  const char* dtypes;         // what the manifest lists, for error messages
  uint64_t same_shape_mask;   // bit i: Tensor argument i must have the first one's shape
  void* launchers[4];         // float32, float16, bfloat16, float64; null if not listed
};
constexpr uint64_t kTableMagic = 0x6b72656754424c31ULL;  // "kregTBL1"

int dtype_slot(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return 0;
    case c10::ScalarType::Half: return 1;
    case c10::ScalarType::BFloat16: return 2;
    case c10::ScalarType::Double: return 3;
    default: return -1;
  }
}

kreg_tensor view_of(const at::Tensor& t) {
  return kreg_tensor{t.data_ptr(), t.numel(), t.dim(), t.sizes().data(), t.strides().data()};
}
)CPP";

// JIT only: the table arrives as an integer argument of the op. (An AOT unit
// holds its tables as constants instead; see codegen_aot.cc.)
constexpr const char* kTableLookup = R"CPP(
const LauncherTable& table_at(int64_t address) {
  const auto* table = reinterpret_cast<const LauncherTable*>(address);
  TORCH_CHECK(table != nullptr && table->magic == kTableMagic,
              "kernel registry: this op was called with a bad launcher table; "
              "call it through the handle registry.get() returns");
  return *table;
}
)CPP";

constexpr const char* kChecks = R"CPP(
// Every check names the argument and says what to do; none of them copies.
void check_tensor(const LauncherTable& table, const at::Tensor& t, const char* arg, int index,
                  const at::Tensor& first, const char* first_arg) {
  TORCH_CHECK(t.defined(), table.op_name, ": argument '", arg, "' is an undefined tensor");
  TORCH_CHECK(@DEVICE_TEST@, table.op_name, ": argument '", arg, "' is on ", t.device(),
              " but this build of the op runs on @DEVICE_WORD@; move it with @MOVE_HINT@ "
              "(the op never copies implicitly)");
  TORCH_CHECK(t.device() == first.device(), table.op_name, ": argument '", arg, "' is on ",
              t.device(), " but '", first_arg, "' is on ", first.device(),
              "; put all tensors on one device");
  TORCH_CHECK(t.scalar_type() == first.scalar_type(), table.op_name, ": argument '", arg,
              "' is ", t.scalar_type(), " but '", first_arg, "' is ", first.scalar_type(),
              "; convert one of them with .to(dtype) (the op never converts implicitly)");
  TORCH_CHECK(t.is_contiguous(), table.op_name, ": argument '", arg,
              "' is not contiguous (sizes ", t.sizes(), ", strides ", t.strides(),
              "); pass .contiguous() (the op never copies implicitly)");
  if ((table.same_shape_mask >> index) & 1u) {
    TORCH_CHECK(t.sizes() == first.sizes(), table.op_name, ": argument '", arg, "' has shape ",
                t.sizes(), " but '", first_arg, "' has shape ", first.sizes());
  }
}

}  // namespace
)CPP";

const char* device_test(const std::string& backend) {
  return backend == "cuda" ? "t.is_cuda()" : "t.is_cpu()";
}

std::string c_type(ArgType type) {
  switch (type) {
    case ArgType::kTensor: return "const at::Tensor&";
    case ArgType::kFloat: return "double";
    case ArgType::kInt: return "int64_t";
    case ArgType::kBool: return "bool";
  }
  return "";
}

std::string launcher_param_type(ArgType type) {
  switch (type) {
    case ArgType::kTensor: return "kreg_tensor";
    case ArgType::kFloat: return "float";
    case ArgType::kInt: return "int64_t";
    case ArgType::kBool: return "bool";
  }
  return "";
}

std::string launcher_arg(const Arg& arg) {
  switch (arg.type) {
    case ArgType::kTensor: return "view_of(" + arg.name + ")";
    // Python floats arrive as double; the launcher contract is float, narrowed here, once.
    case ArgType::kFloat: return "static_cast<float>(" + arg.name + ")";
    default: return arg.name;
  }
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

std::string schema_type(ArgType type) {
  switch (type) {
    case ArgType::kTensor: return "Tensor";
    case ArgType::kFloat: return "float";
    case ArgType::kInt: return "int";
    case ArgType::kBool: return "bool";
  }
  return "";
}

}  // namespace

// The pieces both generators emit (declared in codegen_aot.h): the JIT binding
// below and the AOT registration units of codegen_aot.cc check, allocate and
// launch with the same text, so they cannot drift apart.
namespace binding_text {

std::string prologue(const std::string& backend, bool with_table_lookup) {
  const bool cuda = backend == "cuda";
  std::string text = std::string(kPrologueHead) + (with_table_lookup ? kTableLookup : "") + kChecks;
  replace_all(text, "@BACKEND_INCLUDES@",
              cuda ? "#include <c10/cuda/CUDAGuard.h>\n#include <c10/cuda/CUDAStream.h>" : "");
  replace_all(text, "@DEVICE_TEST@", device_test(backend));
  replace_all(text, "@DEVICE_WORD@", cuda ? "CUDA" : "the CPU");
  replace_all(text, "@MOVE_HINT@", cuda ? ".cuda()" : ".cpu()");
  return text;
}

const Arg& first_tensor(const Signature& signature, const std::string& caller) {
  for (const Arg& arg : signature.args) {
    if (arg.type == ArgType::kTensor) return arg;
  }
  throw std::invalid_argument(caller + ": signature has no Tensor argument");
}

std::string cpp_params(const Signature& signature) {
  std::string text;
  for (const Arg& arg : signature.args) {
    text += (text.empty() ? "" : ", ") + c_type(arg.type) + " " + arg.name;
  }
  return text;
}

std::string schema_params(const Signature& signature) {
  std::string text;
  for (const Arg& arg : signature.args) {
    text += (text.empty() ? "" : ", ") + schema_type(arg.type) + " " + arg.name;
  }
  return text;
}

std::string launcher_params(const Signature& signature) {
  // The output, every argument in order, then the stream.
  std::string text = "kreg_tensor";
  for (const Arg& arg : signature.args) text += ", " + launcher_param_type(arg.type);
  return text + ", void*";
}

std::string checks_and_call(const Signature& signature, const std::string& backend,
                            const std::string& launcher_type) {
  const bool cuda = backend == "cuda";
  const Arg& first = first_tensor(signature, "checks_and_call");
  std::ostringstream out;
  int tensor_index = 0;
  for (const Arg& arg : signature.args) {
    if (arg.type != ArgType::kTensor) continue;
    out << "  check_tensor(table, " << arg.name << ", \"" << arg.name << "\", " << tensor_index++
        << ", " << first.name << ", \"" << first.name << "\");\n";
  }
  out << "  const int slot = dtype_slot(" << first.name << ".scalar_type());\n"
      << "  void* launcher = slot < 0 ? nullptr : table.launchers[slot];\n"
      << "  TORCH_CHECK(launcher != nullptr, table.op_name, \": dtype \", " << first.name
      << ".scalar_type(),\n              \" is not supported; the manifest lists \", table.dtypes);\n";
  if (cuda) out << "  const c10::cuda::CUDAGuard device_guard(" << first.name << ".device());\n";
  out << "  at::Tensor out = at::empty_like(" << first.name << ");\n"
      << "  if (out.numel() == 0) return out;\n";
  if (cuda) {
    out << "  void* stream = c10::cuda::getCurrentCUDAStream(" << first.name
        << ".device().index()).stream();\n";
  } else {
    out << "  void* stream = nullptr;\n";
  }
  out << "  const char* error = reinterpret_cast<" << launcher_type << ">(launcher)(view_of(out)";
  for (const Arg& arg : signature.args) out << ", " << launcher_arg(arg);
  out << ", stream);\n"
      << "  TORCH_CHECK(error == nullptr, table.op_name, \": the launcher failed: \", error);\n"
      << "  return out;\n}\n";
  return out.str();
}

}  // namespace binding_text

std::string generate_binding(const Signature& signature, const std::string& backend,
                             const std::string& module_name) {
  using namespace binding_text;
  if (backend != "cpu" && backend != "cuda") {
    throw std::invalid_argument("generate_binding: backend must be cpu or cuda, not " + backend);
  }
  first_tensor(signature, "generate_binding");  // throws before any text is made

  std::ostringstream out;
  out << "// Generated by the kernel registry for the op signature\n//   " << signature.canonical()
      << "\n// on the " << backend << " backend (binding template v" << kBindingTemplateVersion
      << ").\n// Do not edit: the text depends only on the signature, so one compiled copy\n"
      << "// serves every kernel version that has it.\n";
  out << prologue(backend, /*with_table_lookup=*/true) << "\n";
  out << "using Launcher = const char* (*)(" << launcher_params(signature) << ");\n\n";
  out << "at::Tensor call(" << cpp_params(signature) << ", int64_t kreg_table) {\n";
  out << "  const LauncherTable& table = table_at(kreg_table);\n";
  out << checks_and_call(signature, backend, "Launcher") << "\n";

  // Registered for both device keys so that a tensor on the wrong device gets
  // the message above rather than the dispatcher's "could not run" error.
  out << "TORCH_LIBRARY(" << module_name << ", m) {\n  m.def(\"call(" << schema_params(signature)
      << ", int kreg_table) -> Tensor\");\n}\n";
  for (const char* key : {"CPU", "CUDA"}) {
    out << "TORCH_LIBRARY_IMPL(" << module_name << ", " << key << ", m) { m.impl(\"call\", &call); }\n";
  }
  return out.str();
}

}  // namespace kreg
