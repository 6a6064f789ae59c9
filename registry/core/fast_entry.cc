#include "fast_entry.h"

#include <sstream>


namespace kreg {
namespace {

// The conversions every fast entry shares.
constexpr const char* kHelpers = R"CPP(namespace {

bool plain_tensor(PyObject* object) {
  if (!THPVariable_CheckExact(object)) return false;
  const at::Tensor& t = THPVariable_Unpack(object);
  if (!t.defined() || t.layout() != c10::kStrided || !(t.is_cpu() || t.is_cuda())) return false;
  const c10::DispatchKeySet extra = t.key_set() - c10::autograd_dispatch_keyset - c10::autocast_dispatch_keyset -
                                    c10::DispatchKeySet(c10::DispatchKey::ADInplaceOrView);
  if (extra != c10::DispatchKeySet(t.is_cuda() ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU)) return false;
  return !(t.requires_grad() && c10::GradMode::is_enabled());
}

bool as_double(PyObject* object, double& value) {
  if (PyFloat_CheckExact(object)) {
    value = PyFloat_AS_DOUBLE(object);
    return true;
  }
  if (!PyLong_CheckExact(object)) return false;
  value = PyLong_AsDouble(object);
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool as_int64(PyObject* object, int64_t& value) {
  if (!PyLong_CheckExact(object)) return false;
  int overflow = 0;
  value = PyLong_AsLongLongAndOverflow(object, &overflow);
  if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool as_bool(PyObject* object, bool& value) {
  if (object != Py_True && object != Py_False) return false;
  value = object == Py_True;
  return true;
}

// No mode, transform or tracer active: the thread includes no dispatch key
// beyond the two it always does (a dispatch mode adds Python, functorch its
// layers), and no torch function mode.
bool plain_context() {
  const c10::DispatchKeySet always{c10::DispatchKey::BackendSelect, c10::DispatchKey::ADInplaceOrView};
  return (c10::impl::tls_local_dispatch_key_set().included_ - always).empty() &&
         !at::impl::torch_function_mode_enabled();
}

)CPP";

// The entry itself: arguments read by the table's kinds, as the boxed kernel
// reads them (codegen.cc), then the same run().
constexpr const char* kFastCall = R"CPP(
// Whether the table's op has a fast entry: int[], ScalarType? and an optional
// Tensor(a!) always take the dispatcher.
bool convertible(const LauncherTable& table) {
  for (int i = 0; i < table.arg_count; ++i) {
    const char kind = table.arg_kinds[i];
    if (kind == 'l' || kind == 's' || (kind == 'O' && ((table.mutated_mask >> i) & 1u))) return false;
  }
  return true;
}

PyObject* fast_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  int64_t address = 0;
  if (!as_int64(self, address)) Py_RETURN_NOTIMPLEMENTED;
  const LauncherTable& table = table_at(address);
  if (nargs != table.arg_count || !plain_context()) Py_RETURN_NOTIMPLEMENTED;
  CallArgs a;
  kreg_value* values = a.values + table.return_count;
  for (int i = 0; i < table.arg_count; ++i) {
    PyObject* object = args[i];
    switch (table.arg_kinds[i]) {
      case 'O':
        if (object == Py_None) break;
        [[fallthrough]];
      case 'T':
        if (!plain_tensor(object)) Py_RETURN_NOTIMPLEMENTED;
        a.tensors[i] = &THPVariable_Unpack(object);
        break;
      case 'f':
        if (!as_double(object, values[i].f64)) Py_RETURN_NOTIMPLEMENTED;
        break;
      case 'i':
        if (!as_int64(object, values[i].i64)) Py_RETURN_NOTIMPLEMENTED;
        break;
      case 'b':
        if (!as_bool(object, values[i].b)) Py_RETURN_NOTIMPLEMENTED;
        break;
      default:
        Py_RETURN_NOTIMPLEMENTED;
    }
  }
  // The profiler sees the op by its name, as the dispatcher's op is seen as kreg_<hash>::call.
  RECORD_FUNCTION(table.op_name, std::vector<c10::IValue>());
  Outputs outs;
  {
    // As torch's own bindings: other Python threads run while the op does.
    pybind11::gil_scoped_release no_gil;
    outs = run(table, a);
  }
  // A tensor written in place has its version counter bumped, as the
  // dispatcher's ADInplaceOrView fallback does for a Tensor(a!) argument, so
  // autograd sees the write. An inference tensor has no counter.
  for (int i = 0; i < table.arg_count; ++i) {
    if (((table.mutated_mask >> i) & 1u) && !a.tensors[i]->is_inference()) {
      a.tensors[i]->unsafeGetTensorImpl()->bump_version();
    }
  }
  if (table.return_count == 0) Py_RETURN_NONE;
  if (table.return_count == 1) return THPVariable_Wrap(std::move(outs[0]));
  PyObject* tuple = PyTuple_New(table.return_count);
  if (tuple == nullptr) return nullptr;
  for (int k = 0; k < table.return_count; ++k) {
    PyObject* out = THPVariable_Wrap(std::move(outs[k]));
    if (out == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, k, out);
  }
  return tuple;
  END_HANDLE_TH_ERRORS
}

PyMethodDef fast_call_def = {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_call)),
                             METH_FASTCALL, nullptr};

}  // namespace

// A Python function bound to the table at `address`, or None for an op the
// fast entry does not convert.
extern "C" PyObject* kreg_fast_entry(int64_t address) {
  if (!convertible(table_at(address))) Py_RETURN_NONE;
  PyObject* object = PyLong_FromLongLong(address);
  if (object == nullptr) return nullptr;
  PyObject* function = PyCFunction_New(&fast_call_def, object);
  Py_DECREF(object);
  return function;
}
)CPP";

}  // namespace

std::string fast_entry_includes() {
  return "#include <torch/csrc/autograd/python_variable.h>\n"
         "#include <ATen/PythonTorchFunctionTLS.h>\n"
         "#include <ATen/record_function.h>\n"
         "#include <c10/core/GradMode.h>\n"
         "#include <c10/core/impl/LocalDispatchKeySet.h>\n";
}

std::string fast_entry() {
  return std::string("// The handle's fast entry (core/fast_entry.h).\n") + kHelpers + kFastCall;
}

}  // namespace kreg
