#include "codegen.h"

#include <sstream>
#include <stdexcept>

#include "binding_text.h"
#include "dtype.h"
#include "fast_entry.h"

namespace kreg {
namespace {

// The generic op: what check_tensors, allocate (binding_text.cc) and the
// kernel library's entry need, from the values the boxed kernel or the fast
// entry read by the table's argument kinds.
constexpr const char* kGenericCall = R"CPP(
#include <ATen/core/stack.h>

namespace {

// One call's arguments: tensors[i] for a Tensor argument (null for None and
// for every other kind), values[return_count + i] for the rest.
struct CallArgs {
  const at::Tensor* tensors[kMaxArgs] = {};
  kreg_value values[kMaxOutputs + kMaxArgs] = {};
  std::vector<int64_t> lists[kMaxArgs];  // the boxed path's int[] storage
};

using Outputs = c10::SmallVector<at::Tensor, kMaxOutputs>;

Outputs run(const LauncherTable& table, CallArgs& a) {
  int slot = -1;
  void* launcher = check_tensors(table, a.tensors, table.arg_names, table.arg_count, table.first_tensor, &slot,
                                 table.mutated_mask);
  const at::Tensor& first = *a.tensors[table.first_tensor];
  @DEVICE_GUARD@
  Outputs outs;
  bool nothing_written = table.return_count > 0 || table.mutated_mask != 0;
  for (int k = 0; k < table.return_count; ++k) {
    outs.push_back(allocate(table, k, a.tensors, first));
    nothing_written = nothing_written && outs.back().numel() == 0;
  }
  for (int i = 0; i < table.arg_count && nothing_written; ++i) {
    if ((table.mutated_mask >> i) & 1u) nothing_written = a.tensors[i] == nullptr || a.tensors[i]->numel() == 0;
  }
  if (nothing_written) return outs;
  for (int k = 0; k < table.return_count; ++k) a.values[k].tensor = view_of(outs[k]);
  kreg_value* args = a.values + table.return_count;
  for (int i = 0; i < table.arg_count; ++i) {
    const char kind = table.arg_kinds[i];
    if (kind == 'T' || kind == 'O') {
      args[i].tensor = a.tensors[i] != nullptr ? view_of(*a.tensors[i]) : kreg_tensor{nullptr, 0, -1, nullptr, nullptr};
    }
  }
  @STREAM@
  const int wide = slot == kFloat64Slot;
  const char* error = reinterpret_cast<kreg_entry_fn>(const_cast<void*>(table.entry))(launcher, a.values, stream, wide);
  TORCH_CHECK(error == nullptr, table.op_name, ": the launcher failed: ", error);
  return outs;
}

// The dispatcher's kernel of every op: <namespace>::call(<args>, int kreg_table).
void boxed_call(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  c10::IValue* in = stack->data() + (stack->size() - n);
  const LauncherTable& table = table_at(in[n - 1].toInt());
  TORCH_CHECK(static_cast<size_t>(table.arg_count) + 1 == n, table.op_name,
              ": called with a launcher table of another signature; call it through the handle registry.get() returns");
  CallArgs a;
  kreg_value* values = a.values + table.return_count;
  for (int i = 0; i < table.arg_count; ++i) {
    c10::IValue& v = in[i];
    switch (table.arg_kinds[i]) {
      case 'T': a.tensors[i] = &v.toTensor(); break;
      case 'O': a.tensors[i] = v.isNone() ? nullptr : &v.toTensor(); break;
      case 'f': values[i].f64 = v.toDouble(); break;
      case 'i': values[i].i64 = v.toInt(); break;
      case 'b': values[i].b = v.toBool(); break;
      case 'l':
        a.lists[i] = v.toIntVector();
        values[i].list = kreg_int_list{a.lists[i].data(), static_cast<int64_t>(a.lists[i].size())};
        break;
      case 's':
        values[i].dtype = v.isNone() ? -1 : code_of(table, v.toScalarType(), table.arg_names[i]);
        break;
    }
  }
  Outputs outs = run(table, a);
  torch::jit::drop(*stack, n);
  for (at::Tensor& t : outs) stack->emplace_back(std::move(t));
}

}  // namespace

// Registers <ns>::call with `schema` (binding_schema in core/codegen.h) and
// the boxed kernel above for CPU and CUDA (so a tensor on the wrong device
// gets the op's message, not the dispatcher's "could not run"). Returns null,
// or what torch said. The libraries are never freed: the ops stay registered
// for the process's life, as a TORCH_LIBRARY's do.
extern "C" const char* kreg_define(const char* ns, const char* schema) {
  static std::string error;
  try {
    auto* definition = new torch::Library(torch::Library::DEF, ns, std::nullopt, __FILE__, __LINE__);
    definition->def(schema);
    for (c10::DispatchKey key : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA}) {
      auto* impl = new torch::Library(torch::Library::IMPL, ns, key, __FILE__, __LINE__);
      impl->impl("call", torch::CppFunction::makeFromBoxedFunction<&boxed_call>());
    }
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
    return error.c_str();
  }
}
)CPP";

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string generate_shared_binding(const std::string& backend) {
  using namespace binding_text;
  if (backend != "cpu" && backend != "cuda") {
    throw std::invalid_argument("generate_shared_binding: backend must be cpu or cuda, not " + backend);
  }
  const bool cuda = backend == "cuda";
  std::ostringstream out;
  out << "// Generated by the kernel registry: the shared binding of the " << backend
      << " backend (binding template v" << kBindingTemplateVersion
      << ").\n// Do not edit. One compiled copy serves every op of every signature: the\n"
      << "// signature arrives at run time (core/codegen.h).\n";
  out << fast_entry_includes();  // Python's headers come first: they set feature macros
  out << prologue(backend, /*with_table_lookup=*/true) << "\n";
  std::string call = kGenericCall;
  replace_all(call, "@DEVICE_GUARD@", cuda ? "const c10::DeviceGuard device_guard(first.device());" : "");
  // The current stream of the input's device; native_handle() is its cudaStream_t.
  replace_all(call, "@STREAM@",
              cuda ? "void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream("
                     "first.device()).native_handle();"
                   : "void* stream = nullptr;");
  out << "constexpr int kFloat64Slot = " << dtype_code("float64") << ";\n";
  out << call << "\n";
  out << fast_entry();
  return out.str();
}

std::string binding_schema(const Signature& signature) {
  binding_text::first_tensor(signature, "binding_schema");
  return "call(" + binding_text::schema_params(signature) + ", int kreg_table) -> " +
         binding_text::schema_returns(signature);
}

}  // namespace kreg
