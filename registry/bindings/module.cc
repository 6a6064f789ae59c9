// registry._core: the C++ core as seen from Python. Each bind_<area>.cc adds
// one area; this file only assembles them and maps C++ errors to Python ones.
#include <pybind11/pybind11.h>

#include "manifest.h"
#include "signature.h"

namespace py = pybind11;

namespace kreg::python {
void init_manifest(py::module_& m);
void init_build(py::module_& m);
void init_cache(py::module_& m);
void init_aot(py::module_& m);
void init_plan(py::module_& m);
}  // namespace kreg::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "The kernel registry's C++ core: manifests, include scanning, keys, the cache.";

  // ManifestError keeps file and field as attributes so tools can point at them.
  // The class object is leaked on purpose: it must outlive every translation.
  static PyObject* manifest_error =
      PyErr_NewExceptionWithDoc("registry._core.ManifestError",
                                "A kernel.toml problem; .file and .field say where.",
                                PyExc_ValueError, nullptr);
  m.attr("ManifestError") = py::handle(manifest_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kreg::ManifestError& e) {
      py::object err = py::handle(manifest_error)(e.what());
      err.attr("file") = e.file();
      err.attr("field") = e.field();
      PyErr_SetObject(manifest_error, err.ptr());
    } catch (const kreg::SignatureError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  kreg::python::init_manifest(m);
  kreg::python::init_build(m);
  kreg::python::init_cache(m);
  kreg::python::init_aot(m);
  kreg::python::init_plan(m);
}
