// Registering with pybind11 costs ~10-15 us per function, property or method,
// and a fresh process's `get` that finds everything cached uses a small part
// of the module. So the module registers that part when imported (each
// init_<area>) and the rest on the first access to anything not registered
// yet (each init_<area>_on_demand): a module attribute (module.cc's PEP 562
// __getattr__) or a member of a registered class (the class __getattr__ that
// defer_rest_of adds). Either way everything is registered at once, and
// `X.name` works for every name at any time.
//
// Two rules keep conversions working:
// - A class that an eager function or member returns is registered eagerly
//   (pybind11 cannot convert a value of an unregistered type); its members
//   may still be deferred. A class only deferred members return is deferred
//   whole.
// - Special methods (__repr__, __len__, __enter__, ...) stay eager: Python
//   looks them up on the type, never through __getattr__. So do constructors
//   of classes whose fields Python sets (their __init__ registers the rest
//   first: setting an attribute does not pass through __getattr__).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace kreg::python {

namespace py = pybind11;

// Registers every deferred part (once; module.cc). True when this call did it.
bool register_on_demand();

// The class T registered earlier, to add its deferred members to.
template <typename T>
py::class_<T> registered_class() {
  return py::reinterpret_borrow<py::class_<T>>(py::type::of<T>());
}

// Gives `cls` a __getattr__ that registers the deferred members, then looks
// again; a name that is still missing is an AttributeError as usual.
template <typename T>
py::class_<T>& defer_rest_of(py::class_<T>& cls) {
  cls.def("__getattr__", [](py::handle self, const std::string& name) -> py::object {
    if (name.rfind("__", 0) != 0 && register_on_demand()) return self.attr(name.c_str());
    throw py::attribute_error("'" + std::string(py::str(py::type::handle_of(self).attr("__name__"))) +
                              "' object has no attribute '" + name + "'");
  });
  return cls;
}

}  // namespace kreg::python
