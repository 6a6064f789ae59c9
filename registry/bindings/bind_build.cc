// What a build is keyed on: include closures, keys, stamps, compilers, and the
// generated binding's text.
#include <pybind11/pybind11.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "codegen.h"
#include "file_stamp.h"
#include "hash.h"
#include "include_scan.h"
#include "key.h"
#include "on_demand.h"
#include "toolchain.h"

#include "stamp_set.h"

namespace py = pybind11;

namespace kreg::python {

namespace {

// StampSet.unchanged() as a plain CPython METH_NOARGS method, not a pybind11
// one: it is the one core call of every in-process `get`, and skipping
// pybind11's argument dispatch makes the call itself about 3x cheaper. The
// method descriptor has already checked that `self` is a StampSet.
PyObject* stamp_set_unchanged(PyObject* self, PyObject* /*no args*/) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  auto* set = static_cast<StampSet*>(instance->get_value_and_holder().value_ptr());
  if (set == nullptr) {
    PyErr_SetString(PyExc_TypeError, "StampSet.unchanged(): the StampSet was not initialised");
    return nullptr;
  }
  if (stamps_unchanged_watched(set->stamps, set->watch)) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyMethodDef stamp_set_unchanged_def = {
    "unchanged", stamp_set_unchanged, METH_NOARGS,
    "True when every file still has the stat it had when stamped (one read() of the change watch "
    "while nothing happened, else one stat() each)."};

}  // namespace


void init_build(py::module_& m) {
  // A constant, not a call: every `get` reads it (environment.host_cxx_flags).
  m.attr("HOST_CXX_FLAGS") = py::tuple(py::cast(host_cxx_flags()));
  // A fresh `get` asks a StampSet whether anything changed; the rest of this
  // area is deferred (on_demand.h).
  py::class_<StampSet> stamp_set(m, "StampSet");
  defer_rest_of(stamp_set)
      .def(py::init<>())
      .def(py::init([](const std::vector<std::string>& paths) {
             StampSet set;
             for (const std::string& path : paths) {
               auto stamp = stamp_file(path);
               if (!stamp) throw std::runtime_error("cannot read " + path);
               set.stamps.push_back(std::move(*stamp));
             }
             return set;
           }),
           py::arg("paths"))
      .def("__len__", [](const StampSet& set) { return set.stamps.size(); });
  py::object unchanged = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(stamp_set.ptr()), &stamp_set_unchanged_def));
  if (!unchanged) throw py::error_already_set();
  stamp_set.attr("unchanged") = unchanged;

  // The key input's text in one call (what a `get` needs of the identity).
  m.def("compiler_identity_text",
        [](const std::string& command, const std::string& memo_file,
           const std::function<std::string(const std::string&)>& ask) {
          return identify_compiler(command, memo_file, ask).text();
        },
        py::arg("command"), py::arg("memo_file"), py::arg("ask") = nullptr);
}

// What no cached `get` uses: registered on first use (module.cc).
void init_build_on_demand(py::module_& m) {
  py::class_<Digest>(m, "Digest").def("hex", &Digest::hex);
  py::class_<KeyInput>(m, "KeyInput")
      .def(py::init<>())
      .def_readonly("name", &KeyInput::name)
      .def_readonly("value", &KeyInput::value);
  py::class_<Key>(m, "Key")
      .def_property_readonly("hex", [](const Key& k) { return k.digest.hex(); })
      .def_readonly("inputs", &Key::inputs);
  py::class_<FileStamp>(m, "FileStamp")
      .def_readonly("path", &FileStamp::path)
      .def_property_readonly("content", [](const FileStamp& s) { return s.content.hex(); });
  py::class_<StampCheck>(m, "StampCheck")
      .def_readonly("changed", &StampCheck::changed)
      .def_readonly("refreshed", &StampCheck::refreshed);
  registered_class<StampSet>()
      .def_property(
          "stamps", [](const StampSet& set) { return set.stamps; },
          [](StampSet& set, std::vector<FileStamp> stamps) {
            set.stamps = std::move(stamps);
            set.watch = WatchState();  // the new files are not watched yet
          })
      .def_property_readonly("watched",
                             [](const StampSet& set) { return set.watch.mode == WatchState::kWatched; })
      .def("check", [](StampSet& set) { return check_stamps(set.stamps); })
      .def_property_readonly("paths", [](const StampSet& set) {
        std::vector<std::string> paths;
        for (const FileStamp& s : set.stamps) paths.push_back(s.path);
        return paths;
      });

  // The digest of a file with these bytes (hash_file's): a key can then cover
  // exactly the bytes a compiler was handed (the NVRTC path snapshots).
  m.def("hash_bytes_hex", [](const py::bytes& bytes) {
    return hash_bytes(std::string_view(bytes)).hex();
  });
  m.def("hash_fields_hex", &hash_fields_hex, py::arg("fields"));

  py::class_<IncludeClosure>(m, "IncludeClosure")
      .def_readonly("files", &IncludeClosure::files)
      .def_readonly("unresolved", &IncludeClosure::unresolved);
  m.def("scan_include_closure", &scan_include_closure, py::arg("sources"), py::arg("include_dirs"));

  py::class_<KeyBuilder>(m, "KeyBuilder")
      .def(py::init<>())
      .def("add", &KeyBuilder::add, py::return_value_policy::reference_internal)
      .def("add_list", &KeyBuilder::add_list, py::return_value_policy::reference_internal)
      .def("add_file", &KeyBuilder::add_file, py::return_value_policy::reference_internal)
      .def("finish", &KeyBuilder::finish);
  m.def("diff_key_inputs", &diff_key_inputs, py::arg("before"), py::arg("after"));

  py::class_<CompilerIdentity>(m, "CompilerIdentity")
      .def_readonly("path", &CompilerIdentity::path)
      .def_readonly("version", &CompilerIdentity::version)
      .def("text", &CompilerIdentity::text);
  m.def("identify_compiler", &identify_compiler, py::arg("command"), py::arg("memo_file"),
        py::arg("ask") = nullptr);
  m.def("find_in_path", &find_in_path, py::arg("name"));

  m.def("generate_shared_binding", &generate_shared_binding, py::arg("backend"));
  m.def("binding_schema", &binding_schema, py::arg("signature"));
}

}  // namespace kreg::python
