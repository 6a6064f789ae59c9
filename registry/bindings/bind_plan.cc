// The plan of a `get` (plan.h), the claims its builds run under, the pins of
// what a process loaded, and the cache layout's names.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <dlfcn.h>

#include <cstddef>

#include "build_keys.h"
#include "discovery.h"
#include "dtype.h"
#include "inline_kernels.h"
#include "launcher_table.h"
#include "launcher_table_image.h"
#include "manifest.h"
#include "on_demand.h"
#include "pin_set.h"
#include "plan.h"
#include "shared_output_pool.h"
#include "build_claim.h"
#include "stamp_set.h"

namespace py = pybind11;

namespace kreg::python {

namespace {

// Each field of a launcher-table struct (kreg/launcher_table.h): name -> (offset, size).
#define KREG_FIELD(T, f) fields[#f] = py::make_tuple(offsetof(T, f), sizeof(T::f))

py::dict layout_of(size_t size, const py::dict& fields) {
  py::dict out;
  out["size"] = size;
  out["fields"] = fields;
  return out;
}

// The launcher table's layout as this compiler lays it out, for the ctypes
// mirror of registry/isolation/proxy.py (a test compares the two field by field).
py::dict table_layout() {
  py::dict structs;
  {
    py::dict fields;
    KREG_FIELD(kreg_launcher_dim_term, kind);
    KREG_FIELD(kreg_launcher_dim_term, arg);
    KREG_FIELD(kreg_launcher_dim_term, a);
    KREG_FIELD(kreg_launcher_dim_term, b);
    structs["kreg_launcher_dim_term"] = layout_of(sizeof(kreg_launcher_dim_term), fields);
  }
  {
    py::dict fields;
    KREG_FIELD(kreg_launcher_output_decl, dtype_code);
    KREG_FIELD(kreg_launcher_output_decl, dtype_arg);
    KREG_FIELD(kreg_launcher_output_decl, ndims);
    KREG_FIELD(kreg_launcher_output_decl, unused);
    KREG_FIELD(kreg_launcher_output_decl, dims);
    structs["kreg_launcher_output_decl"] = layout_of(sizeof(kreg_launcher_output_decl), fields);
  }
  {
    py::dict fields;
    KREG_FIELD(kreg_launcher_route, dtype_slot);
    KREG_FIELD(kreg_launcher_route, ndims);
    KREG_FIELD(kreg_launcher_route, bucket);
    KREG_FIELD(kreg_launcher_route, launcher);
    structs["kreg_launcher_route"] = layout_of(sizeof(kreg_launcher_route), fields);
  }
  {
    py::dict fields;
    KREG_FIELD(kreg_launcher_table, magic);
    KREG_FIELD(kreg_launcher_table, op_name);
    KREG_FIELD(kreg_launcher_table, dtypes);
    KREG_FIELD(kreg_launcher_table, same_shape_mask);
    KREG_FIELD(kreg_launcher_table, arg_dtypes);
    KREG_FIELD(kreg_launcher_table, outputs);
    KREG_FIELD(kreg_launcher_table, launchers);
    KREG_FIELD(kreg_launcher_table, route_count);
    KREG_FIELD(kreg_launcher_table, routes);
    KREG_FIELD(kreg_launcher_table, shared_output_allocate);
    KREG_FIELD(kreg_launcher_table, shared_output_release);
    KREG_FIELD(kreg_launcher_table, entry);
    KREG_FIELD(kreg_launcher_table, arg_count);
    KREG_FIELD(kreg_launcher_table, return_count);
    KREG_FIELD(kreg_launcher_table, first_tensor);
    KREG_FIELD(kreg_launcher_table, output_padding);
    KREG_FIELD(kreg_launcher_table, mutated_mask);
    KREG_FIELD(kreg_launcher_table, arg_kinds);
    KREG_FIELD(kreg_launcher_table, arg_names);
    structs["kreg_launcher_table"] = layout_of(sizeof(kreg_launcher_table), fields);
  }
  py::dict limits;
  limits["magic"] = KREG_TABLE_MAGIC;
  limits["max_args"] = KREG_TABLE_MAX_ARGS;
  limits["max_outputs"] = KREG_TABLE_MAX_OUTPUTS;
  limits["max_output_dims"] = KREG_TABLE_MAX_OUTPUT_DIMS;
  limits["max_route_dims"] = KREG_TABLE_MAX_ROUTE_DIMS;
  limits["dtype_slots"] = KREG_TABLE_DTYPE_SLOTS;
  py::dict layout;
  layout["structs"] = structs;
  layout["limits"] = limits;
  return layout;
}

#undef KREG_FIELD

PlanFacts facts_of(const std::string& backend, const std::map<std::string, std::string>& env,
                   const std::string& registry_include, const std::vector<std::string>& loaded_namespaces,
                   bool rebuild, const std::vector<HeaderPackage>& header_packages = {}) {
  PlanFacts facts;
  facts.backend = backend;
  facts.env = env;
  facts.registry_include = registry_include;
  facts.header_packages = header_packages;
  facts.loaded_namespaces = loaded_namespaces;
  facts.rebuild = rebuild;
  return facts;
}

}  // namespace

void init_plan(py::module_& m) {
  py::dict layout;
  for (const auto& [name, path] : cache_layout()) layout[py::str(name)] = path;
  m.attr("CACHE_LAYOUT") = layout;

  // The manifest of the kernel named `name`: a notebook cell's held in memory
  // (inline_kernels.h), else the one under `roots`, parsed; None when no
  // folder has that name (the caller then says which names there are).
  m.def("find_kernel", [](const std::string& name, const std::vector<std::string>& roots) -> std::optional<Manifest> {
    if (std::optional<Manifest> cell = find_inline_kernel(name)) return cell;
    std::optional<KernelLocation> loc = locate_kernel(name, roots);
    if (!loc) return std::nullopt;
    return parse_manifest(loc->manifest);
  }, py::arg("name"), py::arg("roots"));

  // A fresh `get` reads these members; the rest are deferred (on_demand.h).
  py::class_<ArtifactPlan> artifact(m, "ArtifactPlan");
  defer_rest_of(artifact)
      .def_readonly("what", &ArtifactPlan::what)
      .def_readonly("hit", &ArtifactPlan::hit)
      .def_property_readonly("missing", &ArtifactPlan::missing);

  py::class_<Plan> plan(m, "Plan");
  defer_rest_of(plan)
      .def_readonly("backend", &Plan::backend)
      .def_readonly("memo_vouched", &Plan::memo_vouched)
      .def_property_readonly("stamp_set", [](const Plan& p) {
        std::vector<FileStamp> watched = p.stamps;
        watched.insert(watched.end(), p.package_stamps.begin(), p.package_stamps.end());
        return StampSet{std::move(watched)};
      })
      .def_readonly("unresolved", &Plan::unresolved)
      .def_readonly("artifacts", &Plan::artifacts)
      .def_readonly("namespaces", &Plan::namespaces)
      .def_readonly("launchers", &Plan::launchers)
      .def_readonly("schemas", &Plan::schemas)
      .def_readonly("binding_schemas", &Plan::binding_schemas)
      .def_readonly("binding_module", &Plan::binding_module)
      .def_readonly("changes", &Plan::changes)
      .def_readonly("memo_current", &Plan::memo_current);

  m.def("make_plan", [](const Manifest& manifest, const CacheStore& store, const std::string& backend,
                        const std::map<std::string, std::string>& env, const std::string& registry_include,
                        const std::vector<std::string>& loaded_namespaces, bool rebuild,
                        const std::vector<HeaderPackage>& header_packages) {
    return make_plan(manifest, facts_of(backend, env, registry_include, loaded_namespaces, rebuild, header_packages),
                     store);
  }, py::arg("manifest"), py::arg("store"), py::arg("backend"), py::arg("env"), py::arg("registry_include"),
        py::arg("loaded_namespaces") = std::vector<std::string>{}, py::arg("rebuild") = false,
        py::arg("header_packages") = std::vector<HeaderPackage>{});

  // The outcome of a get, recorded in one call: the memo, and after builds
  // the cache's size cap. Returns (changes, why gc could not run or "").
  // apart: name -> (key, stamps) of each artifact keyed apart from the plan.
  m.def("record_outcome", [](Plan& plan, const CacheStore& store, std::optional<Key> lib_key,
                             std::vector<FileStamp> lib_extra_stamps,
                             const std::map<std::string, std::pair<std::string, std::vector<FileStamp>>>& apart,
                             bool compiled, std::optional<int64_t> gc_max_bytes, const std::vector<std::string>& keep) {
    Outcome outcome{std::move(lib_key), std::move(lib_extra_stamps), {}, compiled};
    for (const auto& [name, artifact] : apart) outcome.apart[name] = ApartArtifact{artifact.first, artifact.second};
    std::vector<std::string> changes = record_outcome(plan, outcome);
    std::string gc_problem = gc_max_bytes ? collect_garbage(store, *gc_max_bytes, keep) : "";
    return std::make_pair(changes, gc_problem);
  }, py::arg("plan"), py::arg("store"), py::arg("lib_key") = std::nullopt,
        py::arg("lib_extra_stamps") = std::vector<FileStamp>{},
        py::arg("apart") = std::map<std::string, std::pair<std::string, std::vector<FileStamp>>>{},
        py::arg("compiled") = false,
        py::arg("gc_max_bytes") = std::nullopt, py::arg("keep") = std::vector<std::string>{});

  py::class_<PinSet> pins(m, "PinSet");
  defer_rest_of(pins)
      .def(py::init<>())
      .def("hold", &PinSet::hold, py::arg("store"), py::arg("keys"));

  // A launcher table (launcher_table.h) for `op`, its launchers looked up in
  // the kernel library `library` (a dlopen handle: ctypes.CDLL(...)._handle).
  py::class_<OwnedLauncherTable> launcher_table(m, "LauncherTable");
  defer_rest_of(launcher_table).def_property_readonly("address", &OwnedLauncherTable::address);
  m.def("launcher_table", [](uintptr_t library, const std::string& kernel, const OpSpec& op,
                             const std::vector<std::pair<std::string, std::string>>& symbols) {
    void* handle = reinterpret_cast<void*>(library);
    return make_launcher_table(kernel, op, symbols, [handle](const std::string& symbol) {
      return dlsym(handle, symbol.c_str());
    });
  }, py::arg("library"), py::arg("kernel"), py::arg("op"), py::arg("symbols"));
  // A loaded table as an AOT wheel carries it (launcher_table_image.h):
  // (bytes, [(offset, "symbol" | "string", value)]).
  m.def("launcher_table_image", [](const OwnedLauncherTable& table) {
    TableImage image = launcher_table_image(table.table());
    std::vector<std::tuple<size_t, std::string, std::string>> relocations;
    for (const TableRelocation& r : image.relocations) relocations.emplace_back(r.offset, r.kind, r.value);
    return std::make_pair(py::bytes(image.bytes), relocations);
  }, py::arg("table"));
}

// What no cached `get` uses: registered on first use (module.cc).
void init_plan_on_demand(py::module_& m) {
  // registry.tune's winners as routes of a copy of the default config's table.
  registered_class<OwnedLauncherTable>()
      .def("launcher", [](const OwnedLauncherTable& t, const std::string& dtype) -> uintptr_t {
        const int code = dtype_code(dtype);
        return code < 0 || code >= kTableDtypeSlots ? 0 : reinterpret_cast<uintptr_t>(t.table().launchers[code]);
      }, py::arg("dtype"))
      .def_property_readonly("route_count", [](const OwnedLauncherTable& t) { return t.table().route_count; });
  m.def("routed_launcher_table", [](const OwnedLauncherTable& base,
                                    const std::vector<std::tuple<std::string, std::string, uintptr_t>>& routes) {
    std::vector<Route> list;
    for (const auto& [dtype, bucket, launcher] : routes) list.push_back(Route{dtype, bucket, launcher});
    return routed_launcher_table(base, list);
  }, py::arg("base"), py::arg("routes"));
  // The shared output pool (core/shared_output_pool.h), for isolated CPU ops:
  // the two table hooks' addresses, a pointer's segment, the segments unmapped.
  m.def("shared_output_hooks", [] {
    return std::make_pair(reinterpret_cast<uintptr_t>(&kreg_shared_output_allocate),
                          reinterpret_cast<uintptr_t>(&kreg_shared_output_release));
  });
  m.def("shared_output_segment", [](uintptr_t address, int64_t nbytes) -> std::optional<py::tuple> {
    std::optional<SharedSegment> s = shared_output_pool().segment_of(address, nbytes);
    if (!s) return std::nullopt;
    return py::make_tuple(s->id, s->fd, s->base, s->size);
  }, py::arg("address"), py::arg("nbytes"));
  // kreg/launcher_table.h as compiled: {"structs": {name: {"size", "fields":
  // {field: (offset, size)}}}, "limits": {"magic", "max_args", ...}}.
  m.def("table_layout", &table_layout);
  m.def("shared_output_take_retired", [] { return shared_output_pool().take_retired(); });
  m.attr("SHARED_OUTPUT_MIN_BYTES") = SharedOutputPool::kMinBytes;
  registered_class<ArtifactPlan>()
      .def_readonly("kind", &ArtifactPlan::kind)
      .def_readonly("lock_key", &ArtifactPlan::lock_key)
      .def_readonly("key", &ArtifactPlan::key)
      .def_readonly("miss_reason", &ArtifactPlan::miss_reason)
      .def_readonly("force", &ArtifactPlan::force)
      .def_readonly("base", &ArtifactPlan::base)
      .def_readonly("record_path", &ArtifactPlan::record_path)
      .def_readonly("scanned", &ArtifactPlan::scanned)
      .def_readonly("namespace", &ArtifactPlan::namespace_name)
      .def_readonly("source", &ArtifactPlan::source)
      .def("match_record", &ArtifactPlan::match_record, py::arg("path"));
  registered_class<Plan>()
      .def_readonly("kernel", &Plan::kernel)
      .def_readonly("env_fingerprint", &Plan::env_fingerprint)
      .def_readonly("memo_path", &Plan::memo_path)
      .def_readonly("memo", &Plan::memo)
      .def_readonly("stamps", &Plan::stamps)
      .def_readonly("sources", &Plan::sources)
      .def_readonly("built_directly", &Plan::built_directly)
      .def_readonly("include_dirs", &Plan::include_dirs)
      .def_readonly("launcher_header", &Plan::launcher_header)
      .def_readonly("previous_build_seconds", &Plan::previous_build_seconds);
  registered_class<PinSet>().def("held", &PinSet::held);

  py::class_<Claim>(m, "Claim")
      .def_property_readonly("busy", &Claim::busy)
      .def_readonly("hit", &Claim::hit)
      .def_readonly("key", &Claim::key)
      .def_readonly("extra_stamps", &Claim::extra_stamps)
      .def_readonly("staging", &Claim::staging)
      .def("release", [](Claim& c) {
        if (c.lock) c.lock->release();
        c.lock.reset();
      });
  m.def("try_claim", &try_claim, py::arg("store"), py::arg("artifact"),
        py::call_guard<py::gil_scoped_release>());
  // label_roots: (prefix, folder) pairs, as DepLabels takes them.
  m.def("recorded_artifact", [](const std::string& what, const std::string& kind, const Key& base,
                                const std::string& record_path,
                                const std::vector<std::pair<std::string, std::string>>& label_roots,
                                std::vector<std::string> scanned, bool force) {
    std::vector<LabelRoot> roots;
    for (const auto& [prefix, dir] : label_roots) roots.push_back(LabelRoot{prefix, dir});
    return recorded_artifact(what, kind, base, record_path, std::move(roots), std::move(scanned), force);
  }, py::arg("what"), py::arg("kind"), py::arg("base"), py::arg("record_path"), py::arg("label_roots"),
     py::arg("scanned"), py::arg("force"));

  py::class_<Published>(m, "Published")
      .def_readonly("entry", &Published::entry)
      .def_readonly("key", &Published::key)
      .def_readonly("extra_stamps", &Published::extra_stamps);
  m.def("publish_claim", &publish_claim, py::arg("store"), py::arg("artifact"), py::arg("claim"),
        py::arg("entry"), py::arg("reported"), py::arg("build_started_ns"),
        py::call_guard<py::gil_scoped_release>());

  m.def("kernel_lib_key", [](const Manifest& manifest, const std::string& backend,
                             const std::map<std::string, std::string>& env, const std::vector<std::string>& files,
                             const std::string& registry_include, const std::vector<HeaderPackage>& header_packages) {
    return kernel_lib_key(manifest, facts_of(backend, env, registry_include, {}, false, header_packages), files);
  }, py::arg("manifest"), py::arg("backend"), py::arg("env"), py::arg("files"), py::arg("registry_include"),
        py::arg("header_packages") = std::vector<HeaderPackage>{});
  // files: (path, the bytes compiled) of the cubin's snapshot, hashed here.
  m.def("device_key", [](const Manifest& manifest, const std::string& registry_include,
                         const std::vector<std::pair<std::string, py::bytes>>& files, const std::string& recipe,
                         const std::vector<std::string>& options,
                         const std::vector<std::pair<std::string, std::string>>& compiler_inputs,
                         const std::vector<HeaderPackage>& header_packages) {
    std::vector<std::pair<std::string, Digest>> digests;
    for (const auto& [path, bytes] : files) digests.emplace_back(path, hash_bytes(std::string_view(bytes)));
    return device_key(manifest, registry_include, digests, recipe, options, compiler_inputs, header_packages);
  }, py::arg("manifest"), py::arg("registry_include"), py::arg("files"), py::arg("recipe"), py::arg("options"),
     py::arg("compiler_inputs"), py::arg("header_packages") = std::vector<HeaderPackage>{});
  m.def("built_directly", &built_directly, py::arg("manifest"), py::arg("backend"));
  m.def("binding_namespace", &binding_namespace, py::arg("signature"), py::arg("backend"));
  m.def("binding_key", &binding_key, py::arg("backend"), py::arg("env"), py::arg("registry_include"));
  m.def("binding_module_name", &binding_module_name, py::arg("backend"), py::arg("key"));
  m.def("include_dirs", &include_dirs, py::arg("manifest"), py::arg("registry_include"),
        py::arg("header_packages") = std::vector<HeaderPackage>{});
  m.def("key_label_roots", [](const Manifest& manifest, const std::string& registry_include,
                              const std::vector<HeaderPackage>& header_packages) {
    std::vector<std::pair<std::string, std::string>> roots;
    for (const LabelRoot& r : key_label_roots(manifest, registry_include, header_packages)) {
      roots.emplace_back(r.prefix, r.dir);
    }
    return roots;
  }, py::arg("manifest"), py::arg("registry_include"), py::arg("header_packages") = std::vector<HeaderPackage>{});

  // Header packages (header_packages.h): the known table, and one as found (built in Python).
  py::class_<KnownHeaderPackage>(m, "KnownHeaderPackage")
      .def_readonly("distribution", &KnownHeaderPackage::distribution)
      .def_readonly("import_folder", &KnownHeaderPackage::import_folder)
      .def_readonly("include_dirs", &KnownHeaderPackage::include_dirs)
      .def_readonly("extra", &KnownHeaderPackage::extra);
  m.def("known_header_packages", &known_header_packages);
  py::class_<HeaderPackage>(m, "HeaderPackage")
      .def(py::init([](std::string name, std::string version, std::string root, std::vector<std::string> include_dirs,
                       std::string metadata) {
             return HeaderPackage{std::move(name), std::move(version), std::move(root), std::move(include_dirs),
                                  std::move(metadata)};
           }),
           py::arg("name"), py::arg("version"), py::arg("root"), py::arg("include_dirs"), py::arg("metadata") = "")
      .def_readonly("name", &HeaderPackage::name)
      .def_readonly("version", &HeaderPackage::version)
      .def_readonly("root", &HeaderPackage::root)
      .def_readonly("include_dirs", &HeaderPackage::include_dirs)
      .def_readonly("metadata", &HeaderPackage::metadata);
  m.def("kernel_sources", &kernel_sources, py::arg("manifest"), py::arg("backend"), py::arg("registry_include"));
}

}  // namespace kreg::python
