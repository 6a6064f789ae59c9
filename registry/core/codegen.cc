#include "codegen.h"

#include <sstream>
#include <stdexcept>

#include "binding_text.h"
#include "dtype.h"
#include "fast_entry.h"
#include "stable_binding_text.h"

namespace kreg {
namespace {

// The generic op: what check_tensors, allocate (stable_binding_text.cc) and
// the kernel library's entry need, from the values the boxed kernel or the
// fast entry read by the table's argument kinds.
constexpr const char* kGenericCall = R"CPP(
namespace {

// A torch._C function the binding calls on every call. A builtin of the
// form f() (METH_NOARGS) or f(x) (METH_O) is called through its C function,
// as CPython's own call does once it has checked the arguments: ~10 ns
// against ~40 ns through PyObject_CallNoArgs on the 2-core machine (torch
// 2.14). Anything else (the profiler's flag, a pybind function) goes through Python.
struct PythonFunction {
  PyObject* object = nullptr;  // a reference kept for the process's life
  PyCFunction direct = nullptr;
  PyObject* self = nullptr;    // the C function's first argument (its module), borrowed from `object`

  // `object` taking `arity` arguments (0 or 1); null: none was handed over.
  void bind(PyObject* function, int arity) {
    Py_INCREF(function);
    object = function;
    const int flags = PyCFunction_GetFlags(function);  // -1 with an error for anything but a builtin
    if (flags < 0) {
      PyErr_Clear();
      return;
    }
    if (flags == (arity == 0 ? METH_NOARGS : METH_O)) {
      direct = PyCFunction_GetFunction(function);
      self = PyCFunction_GetSelf(function);
    }
  }
  // A new reference, or null with a Python error.
  PyObject* operator()() const { return direct != nullptr ? direct(self, nullptr) : PyObject_CallNoArgs(object); }
  PyObject* operator()(PyObject* arg) const {
    return direct != nullptr ? direct(self, arg) : PyObject_CallFunctionObjArgs(object, arg, nullptr);
  }
};

// What the binding asks of Python, handed over by kreg_init (registry/load.py)
// as objects: torch keeps these in places no stable shim reaches.
struct PythonSide {
  PyObject* tensor_type = nullptr;     // torch.Tensor: the fast entry's plain tensors are exactly this
  const void* dlpack = nullptr;        // torch.Tensor.__dlpack_c_exchange_api__'s DLPackExchangeAPI
  PythonFunction deterministic;        // torch._C._get_deterministic_algorithms
  PythonFunction fill_memory;          // torch._C._get_deterministic_fill_uninitialized_memory
  PythonFunction function_mode;        // torch._C._is_torch_function_mode_enabled
  PythonFunction dispatch_modes;       // torch._C._len_torch_dispatch_stack
  PythonFunction increment_version;    // torch._C._increment_version (a sequence of tensors)
  PythonFunction profiler_enabled;     // torch._C._autograd._profiler_enabled
  PyObject* requires_grad = nullptr;   // "requires_grad", interned
  // torch.Tensor's requires_grad, a data descriptor, and its __get__: read
  // through them, a tensor's flag skips the attribute lookup (~20 ns of ~50).
  PyObject* requires_grad_descriptor = nullptr;
  descrgetfunc requires_grad_get = nullptr;
};
PythonSide python;

// A no-argument flag function's answer; an error counts as false.
bool python_true(const PythonFunction& function) {
  PyObject* value = function();
  if (value == nullptr) {
    PyErr_Clear();
    return false;
  }
  const bool yes = value == Py_True;
  Py_DECREF(value);
  return yes;
}

// Whether torch fills new memory now (deterministic algorithms with
// fill_uninitialized_memory): the GIL held.
bool fills_new_memory_gil_held() {
  return python.deterministic.object != nullptr && python_true(python.deterministic) &&
         python_true(python.fill_memory);
}

// The same from the dispatcher's kernel, which may run without the GIL.
bool fills_new_memory() {
  if (python.deterministic.object == nullptr) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const bool yes = fills_new_memory_gil_held();
  PyGILState_Release(gil);
  return yes;
}

// One call's arguments: tensors[i] for a Tensor argument (null for None and
// for every other kind), values[return_count + i] for the rest.
struct CallArgs {
  ArgInfo infos[kMaxArgs];
  const ArgInfo* tensors[kMaxArgs] = {};
  kreg_value values[kMaxOutputs + kMaxArgs] = {};
};

// Checks, allocates outs[0, return_count) and calls the kernel library's
// entry. `raw`: CUDA outputs may be raw memory (the fast entry's, allocate()).
void run(const LauncherTable& table, CallArgs& a, bool fill, OwnedTensor* outs, bool raw) {
  int slot = -1;
  void* launcher = check_tensors(table, a.tensors, table.arg_names, table.arg_count, table.first_tensor, &slot,
                                 table.mutated_mask);
  const ArgInfo& first = *a.tensors[table.first_tensor];
  const DeviceGuard device_guard(first);
  ArgInfo out_infos[kMaxOutputs];
  bool nothing_written = table.return_count > 0 || table.mutated_mask != 0;
  for (int k = 0; k < table.return_count; ++k) {
    outs[k] = allocate(table, k, a.tensors, first, fill, raw);
    out_infos[k] = info_of(outs[k]);
    nothing_written = nothing_written && out_infos[k].numel == 0;
  }
  for (int i = 0; i < table.arg_count && nothing_written; ++i) {
    if ((table.mutated_mask >> i) & 1u) nothing_written = a.tensors[i] == nullptr || a.tensors[i]->numel == 0;
  }
  if (nothing_written) return;
  for (int k = 0; k < table.return_count; ++k) a.values[k].tensor = view_of(out_infos[k]);
  kreg_value* args = a.values + table.return_count;
  for (int i = 0; i < table.arg_count; ++i) {
    const char kind = table.arg_kinds[i];
    if (kind == 'T' || kind == 'O') {
      args[i].tensor = a.tensors[i] != nullptr ? view_of(*a.tensors[i]) : kreg_tensor{nullptr, 0, -1, nullptr, nullptr};
    }
  }
  void* stream = current_stream(first);
  const int wide = slot == kFloat64Slot;
  const char* error = reinterpret_cast<kreg_entry_fn>(const_cast<void*>(table.entry))(launcher, a.values, stream, wide);
  KREG_CHECK(error == nullptr, table.op_name, ": the launcher failed: ", error);
}

// The dispatcher's kernel of every op: <namespace>::call(<args>, int kreg_table),
// boxed as the stable ABI passes it: the inputs are ours (freed here), the
// outputs handed back in their place.
void boxed_call(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  using torch::stable::detail::to;
  const LauncherTable& table = table_at(to<int64_t>(stack[num_args - 1]));
  KREG_CHECK(static_cast<uint64_t>(table.arg_count) + 1 == num_args &&
                 static_cast<uint64_t>(table.return_count) == num_outputs,
             table.op_name,
             ": called with a launcher table of another signature; call it through the handle registry.get() returns");
  std::optional<torch::stable::Tensor> tensors[kMaxArgs];
  std::vector<int64_t> lists[kMaxArgs];
  std::optional<torch::headeronly::ScalarType> dtypes[kMaxArgs];
  CallArgs a;
  kreg_value* values = a.values + table.return_count;
  for (int i = 0; i < table.arg_count; ++i) {  // every input taken off the stack before any check
    switch (table.arg_kinds[i]) {
      case 'T': tensors[i] = to<torch::stable::Tensor>(stack[i]); break;
      case 'O': tensors[i] = to<std::optional<torch::stable::Tensor>>(stack[i]); break;
      case 'f': values[i].f64 = to<double>(stack[i]); break;
      case 'i': values[i].i64 = to<int64_t>(stack[i]); break;
      case 'b': values[i].b = to<bool>(stack[i]); break;
      case 'l': lists[i] = to<std::vector<int64_t>>(stack[i]); break;
      case 's': dtypes[i] = to<std::optional<torch::headeronly::ScalarType>>(stack[i]); break;
    }
  }
  for (int i = 0; i < table.arg_count; ++i) {
    const char kind = table.arg_kinds[i];
    if (tensors[i].has_value()) {
      a.infos[i] = info_of(tensors[i]->get());
      a.tensors[i] = &a.infos[i];
    } else if (kind == 'l') {
      values[i].list = kreg_int_list{lists[i].data(), static_cast<int64_t>(lists[i].size())};
    } else if (kind == 's') {
      values[i].dtype = -1;
      if (dtypes[i].has_value()) {
        const int32_t code = static_cast<int32_t>(*dtypes[i]);
        values[i].dtype = slot_of_torch_code(code);
        KREG_CHECK(values[i].dtype >= 0, table.op_name, ": argument '", table.arg_names[i], "' is ", dtype_text(code),
                   ", which kernels cannot be told about (see registry/core/dtype.h)");
      }
    }
  }
  OwnedTensor outs[kMaxOutputs];
  run(table, a, fills_new_memory(), outs, false);
  for (int k = 0; k < table.return_count; ++k) stack[k] = torch::stable::detail::from(outs[k].release());
}

// Keeps a C error of torch's as the message kreg_define returns.
bool refused(AOTITorchError error, std::string& message, const std::string& what) {
  if (error == AOTI_TORCH_SUCCESS) return false;
  message = what + " failed (torch logged why above)";
  return true;
}

}  // namespace

// Registers <ns>::call with `schema` (binding_schema in core/codegen.h) and
// the boxed kernel above for CPU and CUDA (so a tensor on the wrong device
// gets the op's message, not the dispatcher's "could not run"). Returns null,
// or what went wrong. The libraries are never freed: the ops stay registered
// for the process's life, as a TORCH_LIBRARY's do.
extern "C" const char* kreg_define(const char* ns, const char* schema) {
  static std::string error;
  TorchLibraryHandle definition = nullptr;
  if (refused(aoti_torch_library_init_def(ns, __FILE__, __LINE__, &definition), error,
              std::string("defining the namespace ") + ns) ||
      refused(aoti_torch_library_def(definition, schema), error, std::string("defining ") + schema)) {
    return error.c_str();
  }
  for (const char* key : {"CPU", "CUDA"}) {
    TorchLibraryHandle impl = nullptr;
    if (refused(aoti_torch_library_init_impl(ns, key, __FILE__, __LINE__, &impl), error,
                std::string("opening ") + ns + " for " + key) ||
        refused(torch_library_impl(impl, "call", &boxed_call, TORCH_ABI_VERSION), error,
                std::string("registering the ") + key + " kernel")) {
      return error.c_str();
    }
  }
  return nullptr;
}
)CPP";

}  // namespace

std::string generate_shared_binding(const std::string& backend) {
  if (backend != "cpu" && backend != "cuda") {
    throw std::invalid_argument("generate_shared_binding: backend must be cpu or cuda, not " + backend);
  }
  std::ostringstream out;
  out << "// Generated by the kernel registry: the shared binding of the " << backend
      << " backend.\n// Do not edit. One compiled copy serves every op of every signature: the\n"
      << "// signature arrives at run time (core/codegen.h).\n";
  out << stable_prologue(backend) << "\n";  // Python's header first: it sets feature macros
  out << "constexpr int kFloat64Slot = " << dtype_code("float64") << ";\n";
  out << kGenericCall << "\n";
  out << fast_entry();
  return out.str();
}

std::string binding_schema(const Signature& signature) {
  binding_text::first_tensor(signature, "binding_schema");
  return "call(" + binding_text::schema_params(signature) + ", int kreg_table) -> " +
         binding_text::schema_returns(signature);
}

}  // namespace kreg
