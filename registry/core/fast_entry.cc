#include "fast_entry.h"

#include <sstream>

#include "binding_text.h"

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

bool convertible(const Arg& arg) {
  // A mutated tensor: the entry bumps its version after the call, as the
  // dispatcher's ADInplaceOrView fallback does (see bump_versions).
  if (arg.mutated) return arg.type == ArgType::kTensor && !arg.optional;
  return arg.type == ArgType::kTensor || arg.type == ArgType::kFloat || arg.type == ArgType::kInt ||
         arg.type == ArgType::kBool;
}

void convert(std::ostringstream& out, const Arg& arg, const std::string& object) {
  const std::string& name = arg.name;
  switch (arg.type) {
    case ArgType::kTensor:
      if (arg.optional) {
        out << "  std::optional<at::Tensor> " << name << ";\n"
            << "  if (" << object << " != Py_None) {\n"
            << "    if (!plain_tensor(" << object << ")) Py_RETURN_NOTIMPLEMENTED;\n"
            << "    " << name << " = THPVariable_Unpack(" << object << ");\n"
            << "  }\n";
      } else {
        out << "  if (!plain_tensor(" << object << ")) Py_RETURN_NOTIMPLEMENTED;\n"
            << "  const at::Tensor& " << name << " = THPVariable_Unpack(" << object << ");\n";
      }
      return;
    case ArgType::kFloat:
      out << "  double " << name << " = 0;\n"
          << "  if (!as_double(" << object << ", " << name << ")) Py_RETURN_NOTIMPLEMENTED;\n";
      return;
    case ArgType::kInt:
      out << "  int64_t " << name << " = 0;\n"
          << "  if (!as_int64(" << object << ", " << name << ")) Py_RETURN_NOTIMPLEMENTED;\n";
      return;
    case ArgType::kBool:
      out << "  bool " << name << " = false;\n"
          << "  if (!as_bool(" << object << ", " << name << ")) Py_RETURN_NOTIMPLEMENTED;\n";
      return;
    default:
      return;  // not convertible: the signature has no fast entry
  }
}

// A tensor written in place has its version counter bumped after the call,
// as the dispatcher's ADInplaceOrView fallback does for a Tensor(a!) argument,
// so autograd sees the write (a saved tensor modified in place is an error on
// backward). An inference tensor has no counter and no ADInplaceOrView key:
// the dispatcher leaves it alone, and so does the entry.
std::string bump_versions(const Signature& signature) {
  std::string text;
  for (const Arg& arg : signature.args) {
    if (arg.mutated) {
      text += "  if (!" + arg.name + ".is_inference()) " + arg.name + ".unsafeGetTensorImpl()->bump_version();\n";
    }
  }
  return text;
}

}  // namespace

std::string fast_entry_includes() {
  return "#include <torch/csrc/autograd/python_variable.h>\n"
         "#include <ATen/PythonTorchFunctionTLS.h>\n"
         "#include <ATen/record_function.h>\n"
         "#include <c10/core/GradMode.h>\n"
         "#include <c10/core/impl/LocalDispatchKeySet.h>\n";
}

std::string fast_entry(const Signature& signature) {
  std::ostringstream out;
  out << "// The handle's fast entry (core/fast_entry.h).\n";
  for (const Arg& arg : signature.args) {
    if (!convertible(arg)) {
      out << "extern \"C\" PyObject* kreg_fast_entry(int64_t /*table*/) { Py_RETURN_NONE; }\n\n";
      return out.str();
    }
  }
  const size_t n = signature.args.size();
  out << kHelpers;
  // self: the table's address, bound when the handle made the function.
  out << "PyObject* fast_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {\n"
      << "  HANDLE_TH_ERRORS\n"
      << "  if (nargs != " << n << " || !plain_context()) Py_RETURN_NOTIMPLEMENTED;\n";
  std::string call_args;
  for (size_t i = 0; i < n; ++i) {
    convert(out, signature.args[i], "args[" + std::to_string(i) + "]");
    call_args += signature.args[i].name + ", ";
  }
  // The profiler sees the op by its name, as the dispatcher's op is seen as kreg_<hash>::call.
  out << "  int64_t kreg_table = 0;\n"
      << "  if (!as_int64(self, kreg_table)) Py_RETURN_NOTIMPLEMENTED;\n"
      << "  RECORD_FUNCTION(table_at(kreg_table).op_name, std::vector<c10::IValue>());\n";
  // As torch's own bindings: other Python threads run while the op does.
  const size_t returns = signature.returns.size();
  if (returns == 0) {
    out << "  {\n    pybind11::gil_scoped_release no_gil;\n    call(" << call_args << "kreg_table);\n  }\n"
        << bump_versions(signature) << "  Py_RETURN_NONE;\n";
  } else {
    out << "  " << binding_text::cpp_return_type(signature) << " result;\n"
        << "  {\n    pybind11::gil_scoped_release no_gil;\n"
        << "    result = call(" << call_args << "kreg_table);\n  }\n"
        << bump_versions(signature);
    if (returns == 1) {
      out << "  return THPVariable_Wrap(std::move(result));\n";
    } else {
      out << "  PyObject* tuple = PyTuple_New(" << returns << ");\n"
          << "  if (tuple == nullptr) return nullptr;\n";
      for (size_t k = 0; k < returns; ++k) {
        out << "  PyObject* out" << k << " = THPVariable_Wrap(std::move(std::get<" << k << ">(result)));\n"
            << "  if (out" << k << " == nullptr) {\n    Py_DECREF(tuple);\n    return nullptr;\n  }\n"
            << "  PyTuple_SET_ITEM(tuple, " << k << ", out" << k << ");\n";
      }
      out << "  return tuple;\n";
    }
  }
  out << "  END_HANDLE_TH_ERRORS\n}\n\n"
      << "PyMethodDef fast_call_def = {\"call\", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_call)),\n"
      << "                             METH_FASTCALL, nullptr};\n\n"
      << "}  // namespace\n\n"
      << "extern \"C\" PyObject* kreg_fast_entry(int64_t table) {\n"
      << "  PyObject* address = PyLong_FromLongLong(table);\n"
      << "  if (address == nullptr) return nullptr;\n"
      << "  PyObject* function = PyCFunction_New(&fast_call_def, address);\n"
      << "  Py_DECREF(address);\n"
      << "  return function;\n}\n\n";
  return out.str();
}

}  // namespace kreg
