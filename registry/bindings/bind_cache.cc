// The cache store, per-kernel memos, dependency records and build locks.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cache_store.h"
#include "dep_record.h"
#include "file_lock.h"
#include "memo.h"
#include "on_demand.h"
#include "remote_layout.h"
#include "atomic_file.h"

namespace py = pybind11;

namespace kreg::python {

void init_cache(py::module_& m) {
  // A fresh `get` reads where a hit lies and when it was built, and hands a
  // store to the plan; the rest is deferred (on_demand.h). Entry() registers it
  // first: Python sets its fields, and setting an attribute does not pass
  // through __getattr__.
  py::class_<Entry> entry(m, "Entry");
  defer_rest_of(entry)
      .def(py::init([] {
        register_on_demand();
        return Entry{};
      }))
      .def_readonly("key", &Entry::key)
      .def_readonly("artifact", &Entry::artifact)
      .def_readonly("built_at", &Entry::built_at)
      .def_readonly("build_seconds", &Entry::build_seconds)
      .def_readonly("dir", &Entry::dir);

  py::class_<CacheStore> store(m, "CacheStore");
  defer_rest_of(store).def(py::init<std::string>(), py::arg("root"));
}

// What no cached `get` uses: registered on first use (module.cc).
void init_cache_on_demand(py::module_& m) {
  registered_class<Entry>()
      .def_readwrite("format", &Entry::format)
      .def_readwrite("key", &Entry::key)
      .def_readwrite("kernel", &Entry::kernel)
      .def_readwrite("backend", &Entry::backend)
      .def_readwrite("kind", &Entry::kind)
      .def_readwrite("artifact", &Entry::artifact)
      .def_readwrite("artifact_size", &Entry::artifact_size)
      .def_readwrite("artifact_xxh3", &Entry::artifact_xxh3)
      .def_readwrite("built_at", &Entry::built_at)
      .def_readwrite("build_seconds", &Entry::build_seconds)
      .def_readwrite("deps", &Entry::deps)
      .def_readwrite("inputs", &Entry::inputs)
      .def_readonly("last_used", &Entry::last_used)
      .def_readonly("disk_bytes", &Entry::disk_bytes);

  py::class_<Lookup>(m, "Lookup")
      .def_readonly("entry", &Lookup::entry)
      .def_readonly("miss_reason", &Lookup::miss_reason);

  // A pin holds a shared lock on one entry until released or collected; a
  // process keeps its pins for life so gc() never removes what it has loaded.
  py::class_<Pin>(m, "Pin")
      .def_property_readonly("key", &Pin::key)
      .def_property_readonly("held", &Pin::held)
      .def("release", &Pin::release)
      .def("__enter__", [](Pin& pin) -> Pin& { return pin; }, py::return_value_policy::reference)
      .def("__exit__", [](Pin& pin, py::args) { pin.release(); })
      .def("__repr__", [](const Pin& pin) {
        return "<Pin " + pin.key() + (pin.held() ? " held>" : " released>");
      });

  py::class_<GcReport>(m, "GcReport")
      .def_readonly("removed", &GcReport::removed)
      .def_readonly("freed_bytes", &GcReport::freed_bytes)
      .def_readonly("kept_live", &GcReport::kept_live)
      .def_readonly("total_bytes", &GcReport::total_bytes)
      .def_readonly("records_removed", &GcReport::records_removed)
      .def("__repr__", [](const GcReport& r) {
        return "<GcReport removed=" + std::to_string(r.removed.size()) +
               " freed_bytes=" + std::to_string(r.freed_bytes) +
               " kept_live=" + std::to_string(r.kept_live) +
               " total_bytes=" + std::to_string(r.total_bytes) + ">";
      });

  registered_class<CacheStore>()
      .def_property_readonly("root", &CacheStore::root)
      .def("object_dir", &CacheStore::object_dir)
      .def("lock_path", &CacheStore::lock_path)
      .def("memo_path", &CacheStore::memo_path)
      .def("deps_path", &CacheStore::deps_path)
      .def("make_staging_dir", &CacheStore::make_staging_dir)
      .def("publish", &CacheStore::publish)
      .def("lookup", &CacheStore::lookup)
      // bytes in, copied before the GIL is released: a fetch on one thread
      // does not stall another thread's build.
      .def("adopt", &CacheStore::adopt, py::arg("key_hex"), py::arg("record"), py::arg("artifact"),
           py::call_guard<py::gil_scoped_release>())
      .def("touch", &CacheStore::touch)
      .def("pin", &CacheStore::pin, py::arg("key_hex"))
      .def("pinned", &CacheStore::pinned, py::arg("key_hex"))
      // GIL released: after a build the scan runs on a thread beside the
      // notebook (cache_cap.py), which must not stall.
      .def("gc", &CacheStore::gc, py::arg("max_bytes"), py::arg("keep") = std::vector<std::string>{},
           py::call_guard<py::gil_scoped_release>())
      .def("clear", &CacheStore::clear)
      .def("list", &CacheStore::list)
      .def("remove", &CacheStore::remove)
      .def("clean_staging", &CacheStore::clean_staging);
  // Only deferred members return a Memo (Plan.memo), so it is deferred whole.
  py::class_<Memo>(m, "Memo")
      .def(py::init<>())
      .def_readwrite("kernel", &Memo::kernel)
      .def_readwrite("backend", &Memo::backend)
      .def_readwrite("env", &Memo::env)
      .def_readwrite("keys", &Memo::keys)
      .def_readwrite("stamps", &Memo::stamps)
      .def_readwrite("inputs", &Memo::inputs);

  // What ArtifactPlan.match_record returns (dep_record.h).
  py::class_<DepMatch>(m, "DepMatch")
      .def_readonly("key", &DepMatch::key)
      .def_readonly("stamps", &DepMatch::stamps);

  m.def("write_file_atomic", [](const std::string& path, const std::string& contents) {
    write_file_atomic(path, contents);  // durable: what Python writes is not re-derived on a bad read
  }, py::arg("path"), py::arg("contents"));

  // The remote cache's key names (core/remote_layout.h).
  m.attr("REMOTE_FORMAT") = kRemoteFormat;
  m.def("parse_entry", &entry_from_toml, py::arg("text"));
  m.def("remote_object_key", &remote_object_key, py::arg("key_hex"));
  m.def("remote_kernel_key", &remote_kernel_key, py::arg("kernel"));
  m.def("remote_claim_key", &remote_claim_key, py::arg("key_hex"));
  m.def("remote_file_key", &remote_file_key, py::arg("relative_path"));

  m.def("read_memo", &read_memo, py::arg("path"));
  m.def("write_memo", &write_memo, py::arg("path"), py::arg("memo"));

  // Dependency records (dep_record.h): the artifact key of a kernel library
  // from its base key, the record in the cache and the files on disk.
  py::class_<DepLabels>(m, "DepLabels")
      .def(py::init([](const std::vector<std::pair<std::string, std::string>>& roots) {
             std::vector<LabelRoot> out;
             for (const auto& [prefix, dir] : roots) out.push_back(LabelRoot{prefix, dir});
             return DepLabels(std::move(out));
           }),
           py::arg("roots"))
      .def("label", &DepLabels::label, py::arg("path"))
      .def("path", &DepLabels::path, py::arg("label"));
  py::class_<DepEntry>(m, "DepEntry").def_readonly("key", &DepEntry::key);
  py::class_<BuildDeps>(m, "BuildDeps")
      .def_readonly("key", &BuildDeps::key)
      .def_readonly("stamps", &BuildDeps::stamps)
      .def_readonly("entry", &BuildDeps::entry);
  m.def("match_dep_record", &match_dep_record, py::arg("path"), py::arg("base"), py::arg("labels"));
  m.def("deps_from_build", &deps_from_build, py::arg("base"), py::arg("labels"), py::arg("reported"),
        py::arg("scanned"), py::arg("build_started_ns"));
  m.def("add_dep_entry", &add_dep_entry, py::arg("path"), py::arg("base"), py::arg("entry"));

  py::class_<FileLock>(m, "FileLock")
      .def_static("try_acquire", &FileLock::try_acquire, py::arg("path"))
      .def("release", &FileLock::release);
  m.def("lock_holder", &lock_holder, py::arg("path"));
}

}  // namespace kreg::python
