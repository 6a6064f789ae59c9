// Manifests, signatures and kernel discovery.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "codegen.h"
#include "closest_name.h"
#include "discovery.h"
#include "derived_manifest.h"
#include "inline_kernels.h"
#include "inline_manifest.h"
#include "dtype.h"
#include "dtype_units.h"
#include "launcher_header.h"
#include "output_spec.h"
#include "manifest.h"
#include "on_demand.h"
#include "signature.h"

namespace py = pybind11;

namespace kreg::python {

void init_manifest(py::module_& m) {
  // A fresh `get` reads these members; the rest are deferred (on_demand.h).
  py::class_<Arg> arg(m, "Arg");
  defer_rest_of(arg)
      .def_readonly("name", &Arg::name)
      .def_readonly("keyword_only", &Arg::keyword_only)
      .def_readonly("has_default", &Arg::has_default)
      .def_readonly("default_text", &Arg::default_text)
      .def_property_readonly("type_name", [](const Arg& a) { return arg_type_name(a.type); });

  py::class_<Signature> signature(m, "Signature");
  defer_rest_of(signature)
      .def_readonly("name", &Signature::name)
      .def_readonly("args", &Signature::args)
      .def("canonical", &Signature::canonical)
      .def("__repr__", [](const Signature& s) { return "<Signature " + s.canonical() + ">"; });

  py::class_<BackendSpec> backend(m, "BackendSpec");
  defer_rest_of(backend)
      .def_readonly("present", &BackendSpec::present)
      .def_readonly("compiler", &BackendSpec::compiler)
      .def_readonly("launcher_compiler", &BackendSpec::launcher_compiler)
      .def_readonly("arch_specific", &BackendSpec::arch_specific)
      .def_property_readonly("device_compiler", &BackendSpec::device_compiler);

  // Launcher tables and fakes read the rest in C++ (launcher_table.h, output_spec.h).
  py::class_<OpSpec> op(m, "OpSpec");
  defer_rest_of(op)
      .def_readonly("signature", &OpSpec::signature)
      .def_readonly("backward", &OpSpec::backward)
      .def_property_readonly("name", [](const OpSpec& op) { return op.signature.name; });

  py::class_<Manifest> manifest(m, "Manifest");
  defer_rest_of(manifest)
      .def_readonly("file", &Manifest::file)
      .def_readonly("dir", &Manifest::dir)
      .def_readonly("name", &Manifest::name)
      .def_readonly("folder", &Manifest::folder)
      .def_readonly("namespace", &Manifest::torch_namespace)
      .def_readonly("binding", &Manifest::binding)
      .def_readonly("cflags", &Manifest::cflags)
      .def_readonly("variant", &Manifest::variant)
      .def_readonly("cpu", &Manifest::cpu)
      .def_readonly("cuda", &Manifest::cuda)
      .def_readonly("ops", &Manifest::ops)
      .def_readonly("header_packages", &Manifest::header_packages)  // resolve.py asks every plan
      .def_readonly("inline_text", &Manifest::inline_text)  // "" but for a notebook cell's
      .def_property_readonly("tunable", [](const Manifest& m) { return !m.tune.empty(); });
}

// What no cached `get` uses: registered on first use (module.cc).
void init_manifest_on_demand(py::module_& m) {
  py::enum_<ArgType>(m, "ArgType")
      .value("Tensor", ArgType::kTensor)
      .value("Float", ArgType::kFloat)
      .value("Int", ArgType::kInt)
      .value("Bool", ArgType::kBool)
      .value("IntList", ArgType::kIntList)
      .value("ScalarType", ArgType::kScalarType);
  registered_class<Arg>()
      .def_readonly("type", &Arg::type)
      .def_readonly("optional", &Arg::optional)
      .def_readonly("mutated", &Arg::mutated)
      .def_property_readonly("type_text", &Arg::type_text);

  py::class_<Return>(m, "Return")
      .def_readonly("name", &Return::name)
      .def_readonly("named", &Return::named);
  registered_class<Signature>()
      .def_readonly("returns", &Signature::returns)
      .def("tensor_count", &Signature::tensor_count)
      .def("first_tensor", &Signature::first_tensor);

  py::class_<DimTerm>(m, "DimTerm")
      .def_property_readonly("kind", [](const DimTerm& t) { return static_cast<int>(t.kind); })
      .def_readonly("arg", &DimTerm::arg)
      .def_readonly("a", &DimTerm::a)
      .def_readonly("b", &DimTerm::b);
  py::class_<OutputSpec>(m, "OutputSpec")
      .def_readonly("text", &OutputSpec::text)
      .def_readonly("dtype_code", &OutputSpec::dtype_code)
      .def_readonly("dtype_arg", &OutputSpec::dtype_arg)
      .def_readonly("dims", &OutputSpec::dims);

  // The dtype table (core/dtype.h): (name, suffix, element size), in code order.
  py::list dtypes;
  for (const DtypeInfo& d : dtype_table()) dtypes.append(py::make_tuple(d.name, d.suffix, d.element_size));
  m.attr("DTYPES") = py::tuple(dtypes);
  registered_class<BackendSpec>()
      .def_readonly("sources", &BackendSpec::sources)
      .def_readonly("cflags", &BackendSpec::cflags)
      .def_readonly("device_sources", &BackendSpec::device_sources)
      .def_readonly("device_cflags", &BackendSpec::device_cflags)
      .def_readonly("prelude", &BackendSpec::prelude)
      .def_readonly("link_sources", &BackendSpec::link_sources)
      .def_readonly("kernels_used", &BackendSpec::kernels_used);
  registered_class<OpSpec>()
      .def_readonly("dtypes", &OpSpec::dtypes)
      .def_readonly("launcher", &OpSpec::launcher)
      .def_readonly("same_shape", &OpSpec::same_shape)
      .def_readonly("arg_dtypes", &OpSpec::arg_dtypes)
      .def_readonly("outputs", &OpSpec::outputs)
      .def_readonly("reference", &OpSpec::reference)
      .def_readonly("baseline", &OpSpec::baseline)
      .def_readonly("sweep", &OpSpec::sweep)
      .def_readonly("tune_params", &OpSpec::tune_params);
  registered_class<Manifest>()
      .def_readonly("description", &Manifest::description)
      .def_readonly("binding_source", &Manifest::binding_source)
      .def_readonly("include_dirs", &Manifest::include_dirs)
      .def_readonly("headers", &Manifest::headers)
      .def_readonly("ldflags", &Manifest::ldflags)
      .def_readonly("reference", &Manifest::reference)
      .def_readonly("tune", &Manifest::tune)
      .def_readonly("config", &Manifest::config)
      .def_readonly("dtype_subset", &Manifest::dtype_subset);

  m.def("parse_signature", &parse_signature, py::arg("text"));
  m.attr("SLICE_END") = kSliceEnd;
  m.def("fake_function", &fake_function, py::arg("signature"), py::arg("outputs"), py::arg("name"),
        py::arg("label") = "");
  m.def("generate_launcher_header", &generate_launcher_header, py::arg("kernel"), py::arg("ops"));
  m.def("entry_symbol", &entry_symbol, py::arg("op"));
  m.def("required_launchers", &required_launchers, py::arg("ops"));
  m.def("explain_launcher_mismatch", &explain_launcher_mismatch, py::arg("ops"), py::arg("compiler_output"),
        py::arg("excerpts"));
  m.def("missing_launchers", &missing_launchers, py::arg("kernel"), py::arg("ops"), py::arg("exported"));
  m.attr("LAUNCHER_HEADER_VERSION") = kLauncherHeaderVersion;
  m.attr("DEVICE_COMPILERS") = py::tuple(py::cast(kDeviceCompilers));

  // The config space ([tune], config_space.h); a config is a list of (name, value).
  py::class_<ConfigParam>(m, "ConfigParam")
      .def_readonly("name", &ConfigParam::name)
      .def_readonly("values", &ConfigParam::values)
      .def_readonly("default", &ConfigParam::default_value);
  py::class_<ConfigSpace>(m, "ConfigSpace")
      .def_readonly("params", &ConfigSpace::params)
      .def_property_readonly("rule", [](const ConfigSpace& s) { return s.rule.text(); })
      .def_property_readonly("empty", &ConfigSpace::empty)
      .def("default_config", &ConfigSpace::default_config)
      .def("enumerate", &ConfigSpace::enumerate);
  m.def("with_config", &with_config, py::arg("manifest"), py::arg("config"));
  m.def("with_extra_flags", &with_extra_flags, py::arg("manifest"), py::arg("backend"), py::arg("cflags"),
        py::arg("ldflags"), py::arg("variant"));
  m.def("with_dtypes", &with_dtypes, py::arg("manifest"), py::arg("backend"), py::arg("dtypes"));
  m.def("config_label", &config_label, py::arg("config"));
  m.def("parse_config_label", &parse_config_label, py::arg("label"));
  m.def("config_defines", &config_defines, py::arg("config"));

  m.def("parse_manifest", &parse_manifest, py::arg("path"));
  // A notebook cell's kernel (inline_manifest.h, inline_kernels.h): composed
  // and parsed in memory, then held under its name for every later get.
  m.def(
      "inline_manifest",
      [](const std::string& name, const std::string& backend, const std::string& source, const std::string& signature,
         const std::vector<std::string>& dtypes, const std::vector<std::pair<std::string, std::string>>& outputs,
         const std::string& dir) {
        return inline_manifest(InlineKernel{name, backend, source, signature, dtypes, outputs}, dir);
      },
      py::arg("name"), py::arg("backend"), py::arg("source"), py::arg("signature"), py::arg("dtypes"),
      py::arg("outputs"), py::arg("dir"));
  m.def("define_inline_kernel", &define_inline_kernel, py::arg("manifest"));
  m.def("inline_kernel_names", &inline_kernel_names);
  m.def("is_valid_kernel_name", &is_valid_kernel_name, py::arg("name"));
  py::class_<KernelLocation>(m, "KernelLocation")
      .def_readonly("name", &KernelLocation::name)
      .def_readonly("manifest", &KernelLocation::manifest)
      .def_readonly("folder", &KernelLocation::folder);
  py::class_<UnusableFolder>(m, "UnusableFolder")
      .def_readonly("dir", &UnusableFolder::dir)
      .def_readonly("name", &UnusableFolder::name)
      .def_readonly("reason", &UnusableFolder::reason);
  py::class_<Discovery>(m, "Discovery")
      .def_readonly("kernels", &Discovery::kernels)
      .def_readonly("unusable", &Discovery::unusable);
  m.def("discover_kernels", &discover_kernels, py::arg("roots"));
  m.def("discover", &discover, py::arg("roots"));
  m.def("kernel_name_from_folder", &kernel_name_from_folder, py::arg("folder"));
  m.def("closest_name", &closest_name, py::arg("name"), py::arg("candidates"));
}

}  // namespace kreg::python
