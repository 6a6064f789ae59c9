// The ahead-of-time registration units (core/codegen_aot.h), for registry/tools/aot.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "codegen_aot.h"

namespace py = pybind11;

namespace kreg::python {

void init_aot(py::module_& m) {
  m.def("generate_aot_def", &generate_aot_def, py::arg("namespace"), py::arg("ops"),
        py::arg("module_name"));
  m.def("generate_aot_impl", &generate_aot_impl, py::arg("namespace"), py::arg("ops"),
        py::arg("backend"), py::arg("module_name"));
}

}  // namespace kreg::python
