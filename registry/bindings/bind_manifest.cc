// Manifests, signatures and kernel discovery.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "discovery.h"
#include "manifest.h"
#include "signature.h"

namespace py = pybind11;

namespace kreg::python {

void init_manifest(py::module_& m) {
  py::enum_<ArgType>(m, "ArgType")
      .value("Tensor", ArgType::kTensor)
      .value("Float", ArgType::kFloat)
      .value("Int", ArgType::kInt)
      .value("Bool", ArgType::kBool);

  py::class_<Arg>(m, "Arg")
      .def_readonly("type", &Arg::type)
      .def_readonly("name", &Arg::name)
      .def_property_readonly("type_name", [](const Arg& a) { return arg_type_name(a.type); });

  py::class_<Signature>(m, "Signature")
      .def_readonly("name", &Signature::name)
      .def_readonly("args", &Signature::args)
      .def("canonical", &Signature::canonical)
      .def("tensor_count", &Signature::tensor_count)
      .def("__repr__", [](const Signature& s) { return "<Signature " + s.canonical() + ">"; });
  m.def("parse_signature", &parse_signature, py::arg("text"));

  py::class_<BackendSpec>(m, "BackendSpec")
      .def_readonly("present", &BackendSpec::present)
      .def_readonly("sources", &BackendSpec::sources)
      .def_readonly("cflags", &BackendSpec::cflags)
      .def_readonly("compiler", &BackendSpec::compiler)
      .def_readonly("device_sources", &BackendSpec::device_sources)
      .def_readonly("device_cflags", &BackendSpec::device_cflags);

  py::class_<OpSpec>(m, "OpSpec")
      .def_readonly("signature", &OpSpec::signature)
      .def_readonly("dtypes", &OpSpec::dtypes)
      .def_readonly("launcher", &OpSpec::launcher)
      .def_readonly("same_shape", &OpSpec::same_shape)
      .def_readonly("reference", &OpSpec::reference)
      .def_property_readonly("name", [](const OpSpec& op) { return op.signature.name; });

  py::class_<Manifest>(m, "Manifest")
      .def_readonly("file", &Manifest::file)
      .def_readonly("dir", &Manifest::dir)
      .def_readonly("name", &Manifest::name)
      .def_readonly("description", &Manifest::description)
      .def_readonly("binding", &Manifest::binding)
      .def_readonly("binding_source", &Manifest::binding_source)
      .def_readonly("include_dirs", &Manifest::include_dirs)
      .def_readonly("headers", &Manifest::headers)
      .def_readonly("cflags", &Manifest::cflags)
      .def_readonly("ldflags", &Manifest::ldflags)
      .def_readonly("reference", &Manifest::reference)
      .def_readonly("cpu", &Manifest::cpu)
      .def_readonly("cuda", &Manifest::cuda)
      .def_readonly("ops", &Manifest::ops);
  m.def("parse_manifest", &parse_manifest, py::arg("path"));
  m.def("is_valid_kernel_name", &is_valid_kernel_name, py::arg("name"));
  m.def("dtype_suffix", &dtype_suffix, py::arg("dtype"));

  py::class_<KernelLocation>(m, "KernelLocation")
      .def_readonly("name", &KernelLocation::name)
      .def_readonly("manifest", &KernelLocation::manifest);
  m.def("discover_kernels", &discover_kernels, py::arg("roots"));
  m.def("closest_name", &closest_name, py::arg("name"), py::arg("candidates"));
}

}  // namespace kreg::python
