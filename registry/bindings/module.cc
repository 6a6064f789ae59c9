// registry._core: the C++ core as seen from Python. Each bind_<area>.cc adds
// one area; this file only assembles them and maps C++ errors to Python ones.
#include <pybind11/pybind11.h>

#include <exception>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>

#include "manifest.h"
#include "on_demand.h"
#include "signature.h"

namespace py = pybind11;

namespace {

// A new exception class registry.errors.<name> with these bases.
PyObject* new_error(const char* name, const char* doc, std::initializer_list<PyObject*> bases) {
  py::tuple base_tuple(bases.size());
  size_t i = 0;
  for (PyObject* base : bases) base_tuple[i++] = py::handle(base);
  const std::string qualified = std::string("registry.errors.") + name;
  PyObject* error = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (error == nullptr) throw py::error_already_set();
  return error;
}

// The module, for the deferred registration (module objects are never freed).
PyObject* on_demand_module = nullptr;

// The error classes, made on first use (a C++ exception to translate, or
// `_core.RegistryError` read) and set on the module then: a cached `get`
// raises none, and making five classes costs a fresh process's import
// ~0.05 ms. Every class derives from RegistryError (registry.errors
// re-exports them all, and its own errors derive from the same class), so a
// tool catches one type; each also keeps the builtin base it replaces, so
// `except ValueError` around a call still holds. Leaked on purpose: they must
// outlive every translation. Named "registry.errors.*": where users import
// them from.
struct ErrorClasses {
  PyObject* registry;
  PyObject* manifest;   // keeps .file and .field, so tools can point at them
  PyObject* signature;
  PyObject* usage;
  PyObject* core;
};

const ErrorClasses& error_classes() {
  static const ErrorClasses classes = [] {
    ErrorClasses c{};
    c.registry = new_error("RegistryError", "Base class of every error the kernel registry raises.",
                           {PyExc_Exception});
    c.manifest = new_error("ManifestError", "A kernel.toml problem; .file and .field say where.",
                           {c.registry, PyExc_ValueError});
    c.signature = new_error("SignatureError",
                            "An op signature the registry cannot read; the message says which part.",
                            {c.registry, PyExc_ValueError});
    c.usage = new_error("UsageError",
                        "A registry function got an argument it cannot use; the message says what it takes.",
                        {c.registry, PyExc_ValueError});
    c.core = new_error("CoreError",
                       "The core could not do what was asked (a cache file it cannot read or write, ...); "
                       "the message says what to do next.", {c.registry, PyExc_RuntimeError});
    py::module_ m = py::reinterpret_borrow<py::module_>(on_demand_module);
    for (PyObject* error : {c.registry, c.manifest, c.signature, c.usage, c.core}) {
      m.attr(py::handle(error).attr("__name__")) = py::handle(error);
    }
    return c;
  }();
  return classes;
}

}  // namespace

namespace kreg::python {
void init_manifest(py::module_& m);
void init_build(py::module_& m);
void init_cache(py::module_& m);
void init_aot(py::module_& m);
void init_plan(py::module_& m);
void init_manifest_on_demand(py::module_& m);
void init_build_on_demand(py::module_& m);
void init_cache_on_demand(py::module_& m);
void init_plan_on_demand(py::module_& m);
void init_ring_on_demand(py::module_& m);

bool register_on_demand() {
  static bool registered = false;
  if (registered) return false;
  registered = true;
  py::module_ m = py::reinterpret_borrow<py::module_>(on_demand_module);
  init_manifest_on_demand(m);
  init_build_on_demand(m);
  init_cache_on_demand(m);
  init_plan_on_demand(m);
  init_ring_on_demand(m);
  init_aot(m);
  return true;
}
}  // namespace kreg::python

PYBIND11_MODULE(_core, m) {
  // No generated signatures in docstrings: pybind11 formats one per function
  // and member as it registers it (~0.1 ms of a fresh process's import).
  // _core is private: registry's modules are its only callers.
  py::options options;
  options.disable_function_signatures();
  m.doc() = "The kernel registry's C++ core: manifests, include scanning, keys, the cache.";

  // The one place C++ exceptions become Python ones (error_classes above).
  // Local to this module: a global translator would also take over every
  // other pybind11 module sharing pybind11's internals, torch's included,
  // so an aten error, or a Python fake's TypeError surfacing through
  // torch.ops, became a CoreError (empty, for the fake's).
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const py::error_already_set&) {
      throw;  // a Python error (KeyboardInterrupt from a polled signal, ...): stays itself
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own (a failed cast, ...): its translator maps them
    } catch (const kreg::ManifestError& e) {
      PyObject* manifest_error = error_classes().manifest;
      py::object err = py::handle(manifest_error)(e.what());
      err.attr("file") = e.file();
      err.attr("field") = e.field();
      PyErr_SetObject(manifest_error, err.ptr());
    } catch (const kreg::SignatureError& e) {
      PyErr_SetString(error_classes().signature, e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(error_classes().usage, e.what());
    } catch (const std::bad_alloc&) {
      throw;  // MemoryError, as pybind11 maps it
    } catch (const std::exception& e) {
      PyErr_SetString(error_classes().core, e.what());
    }
  });

  kreg::python::init_manifest(m);
  kreg::python::init_build(m);
  kreg::python::init_cache(m);
  kreg::python::init_plan(m);

  // The rest is registered on first use (on_demand.h). tests/test_core_calls.py
  // checks that a cached get leaves it unregistered.
  on_demand_module = m.ptr();
  m.def("__getattr__", [](const std::string& name) -> py::object {
    if (name.rfind("__", 0) != 0) {
      error_classes();  // made once, and set on the module
      PyObject* names = PyModule_GetDict(on_demand_module);
      PyObject* value = PyDict_GetItemString(names, name.c_str());
      if (value == nullptr && kreg::python::register_on_demand()) value = PyDict_GetItemString(names, name.c_str());
      if (value != nullptr) return py::reinterpret_borrow<py::object>(value);
    }
    throw py::attribute_error("module 'registry._core' has no attribute '" + name + "'");
  }, py::arg("name"));
}
