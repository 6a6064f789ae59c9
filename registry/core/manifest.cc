#include "manifest.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include <sys/stat.h>

#include "table_limits.h"
#include "output_spec.h"
#include "file_read.h"
#include "closest_name.h"
#include "header_packages.h"
#include "identifier.h"
#include "op_manifest.h"
#include "toml_util.h"
#include "tune_manifest.h"

namespace kreg {

void apply_config(Manifest* m, const Config& config);  // below: the defines of `config` in the flags

namespace {

namespace fs = std::filesystem;

// The keys of each level, in the order the format comment in manifest.h lists
// them (error messages show them in this order).
const char* const kTopKeys[] = {"format",       "name",    "namespace", "description", "binding",   "binding_source",
                                "include_dirs", "header_packages", "headers", "cflags", "ldflags", "reference",
                                "cpu",     "cuda",    "op",   "tune"};
const char* const kBackendKeys[] = {"sources",       "cflags",           "compiler",     "device_sources",
                                    "device_cflags", "prelude",           "launcher_compiler", "arch_specific",
                                    "link_sources",  "kernels_used"};

// Spellings people reach for that edit distance alone would not catch.
const std::map<std::string, std::string>& key_aliases() {
  static const std::map<std::string, std::string> kAliases = {
      {"src", "sources"},        {"srcs", "sources"},
      {"source", "sources"},     {"files", "sources"},
      {"dtype", "dtypes"},       {"types", "dtypes"},
      {"flags", "cflags"},       {"cxxflags", "cflags"},
      {"nvcc_flags", "cflags"},  {"nvccflags", "cflags"},
      {"include", "include_dirs"}, {"includes", "include_dirs"},
      {"include_dir", "include_dirs"}, {"header", "headers"},
      {"header_package", "header_packages"}, {"packages", "header_packages"},
      {"ops", "op"},             {"version", "format"},
      {"shape", "same_shape"},   {"sig", "signature"},
  };
  return kAliases;
}


// The folder's own name, ignoring trailing slashes ("kernels/axpy/" -> "axpy").
std::string basename_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

enum class PathKind { kFile, kDirectory };

// One parse: knows the file and folder so every error can name them.
class ManifestParser {
 public:
  ManifestParser(std::string file, std::string dir)
      : file_(std::move(file)), dir_(std::move(dir)) {}

  Manifest parse(const std::string& text) {
    const toml::table root = parse_toml(text);
    Manifest m;
    m.file = file_;
    m.dir = dir_;
    // The shared readers (toml_util.h) and the [tune] reader know no file:
    // their errors are named here as the file's others are.
    try {
      // The version comes first: a future format may have keys this one rejects.
      check_format(root);
      check_keys(root, "", std::begin(kTopKeys), std::end(kTopKeys));
      parse_top_level(root, &m);
      parse_backend(root, "cpu", &m.cpu);
      parse_backend(root, "cuda", &m.cuda);
      if (!m.cpu.present && !m.cuda.present) {
        fail("", "no backend; add a [cpu] or [cuda] table with sources = [...]");
      }
      m.ops = parse_op_tables(root, key_aliases());
      parse_tunes(root, &m);
    } catch (const TomlFieldError& e) {
      fail(e.field(), e.what());
    }
    apply_config(&m, m.tune.default_config());
    return m;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw ManifestError(file_, field, message);
  }

  toml::table parse_toml(const std::string& text) const {
    toml::table table;
    if (std::optional<TomlProblem> problem = parse_toml_guarded(text, file_, &table)) {
      fail("", std::string(problem->unsupported ? "unsupported" : "invalid") + " TOML at " +
                   std::to_string(problem->line) + ":" + std::to_string(problem->column) + ": " +
                   problem->message);
    }
    return table;
  }

  // ---- structure -----------------------------------------------------------

  void check_format(const toml::table& root) const {
    const toml::node* node = root.get("format");
    if (node == nullptr) fail("format", "missing; add format = 1 at the top of the file");
    const toml::value<int64_t>* value = node->as_integer();
    if (value == nullptr) fail_wrong_type("format", "the integer 1", *node);
    if (value->get() != kManifestFormat) {
      fail("format", "unsupported format " + std::to_string(value->get()) +
                         "; this registry reads format = " + std::to_string(kManifestFormat));
    }
  }

  // Unknown keys suggested with the spellings people reach for (key_aliases).
  static void check_keys(const toml::table& table, const std::string& prefix,
                         const char* const* allowed_begin, const char* const* allowed_end) {
    kreg::check_keys(table, prefix, std::vector<std::string>(allowed_begin, allowed_end), key_aliases());
  }

  // A kernel is found by its name and by its folder's own name (discovery.h),
  // so any folder can hold a kernel: the name is the `name` key, else derived
  // from the folder's name. Names reach paths, symbols and torch.ops.
  void parse_top_level(const toml::table& root, Manifest* m) const {
    m->folder = basename_of(dir_);
    if (const toml::node* n = root.get("name")) {
      m->name = read_string(*n, "name");
      if (!is_valid_kernel_name(m->name)) {
        fail("name", "invalid kernel name " + in_quotes(m->name) +
                         "; use 1-64 characters from [a-z0-9_], not starting with a digit");
      }
    } else {
      m->name = kernel_name_from_folder(m->folder);
      if (m->name.empty()) {
        fail("name", "the folder name " + in_quotes(m->folder) +
                         " gives no kernel name (a name has at most 64 characters from [a-z0-9_]); "
                         "set name = \"...\" in kernel.toml, or rename the folder");
      }
    }
    if (const toml::node* n = root.get("description")) {
      m->description = read_string(*n, "description");
    }
    parse_binding(root, m);
    parse_namespace(root, m);
    if (const toml::node* n = root.get("include_dirs")) {
      m->include_dirs = read_paths(*n, "include_dirs", PathKind::kDirectory);
    }
    if (const toml::node* n = root.get("header_packages")) {
      m->header_packages = read_header_packages(*n);
    }
    if (const toml::node* n = root.get("headers")) {
      m->headers = read_paths(*n, "headers", PathKind::kFile);
    }
    if (const toml::node* n = root.get("cflags")) m->cflags = read_string_list(*n, "cflags");
    if (const toml::node* n = root.get("ldflags")) m->ldflags = read_string_list(*n, "ldflags");
    if (const toml::node* n = root.get("reference")) {
      m->reference = read_string(*n, "reference");
      check_path(m->reference, "reference", PathKind::kFile);
    }
  }

  void parse_binding(const toml::table& root, Manifest* m) const {
    if (const toml::node* n = root.get("binding")) m->binding = read_string(*n, "binding");
    if (m->binding != "generated" && m->binding != "torch-library" && m->binding != "pybind") {
      fail("binding", "unknown binding " + in_quotes(m->binding) +
                          "; use \"generated\" (the default), \"torch-library\" or \"pybind\"");
    }
    const toml::node* source = root.get("binding_source");
    if (m->binding == "pybind") {
      if (source == nullptr) {
        fail("binding_source",
             "missing; binding = \"pybind\" needs binding_source = \"<file>.cpp\"");
      }
      m->binding_source = read_string(*source, "binding_source");
      check_path(m->binding_source, "binding_source", PathKind::kFile);
    } else if (source != nullptr) {
      fail("binding_source",
           "only used with binding = \"pybind\"; remove it or set binding = \"pybind\"");
    }
  }

  // torch.ops.<namespace>: a lab's ops keep the namespace its TORCH_LIBRARY gave them.
  void parse_namespace(const toml::table& root, Manifest* m) const {
    m->torch_namespace = m->name;
    const toml::node* n = root.get("namespace");
    if (n == nullptr) return;
    m->torch_namespace = read_string(*n, "namespace");
    if (!is_c_identifier(m->torch_namespace)) {
      fail("namespace", "invalid namespace " + in_quotes(m->torch_namespace) +
                            "; torch.ops.<namespace> takes a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (m->binding != "torch-library") {
      fail("namespace", "only used with binding = \"torch-library\" (the ops become torch.ops." +
                            m->torch_namespace + ".<op>); add binding = \"torch-library\", or remove namespace");
    }
  }

  void parse_backend(const toml::table& root, const char* name, BackendSpec* spec) const {
    const toml::node* node = root.get(name);
    if (node == nullptr) return;
    const toml::table& table = read_table(*node, name);
    check_keys(table, name, std::begin(kBackendKeys), std::end(kBackendKeys));
    spec->present = true;
    const std::string sources_field = dotted(name, "sources");
    const toml::node* sources = table.get("sources");
    if (sources == nullptr) {
      fail(sources_field, "missing; list the source files, e.g. sources = [\"k.cu\"]");
    }
    spec->sources = read_paths(*sources, sources_field, PathKind::kFile);
    if (spec->sources.empty()) fail(sources_field, "empty; list at least one source file");
    if (const toml::node* n = table.get("cflags")) {
      spec->cflags = read_string_list(*n, dotted(name, "cflags"));
    }
    parse_device_compiler(table, name, spec);
  }

  // [cuda] compiler = "nvrtc" or "nvcc-cubin": the __global__ functions live in
  // device_sources (compiled into a cubin, in-process by NVRTC or by `nvcc
  // -cubin`) and `sources` are host C++ launchers calling them through kreg/launch.h.
  void parse_device_compiler(const toml::table& table, const char* name, BackendSpec* spec) const {
    const bool cuda = std::string(name) == "cuda";
    for (const char* key :
         {"compiler", "device_sources", "device_cflags", "prelude", "link_sources", "kernels_used",
          "launcher_compiler", "arch_specific"}) {
      if (!cuda && table.get(key) != nullptr) {
        fail(dotted(name, key), "only valid in [cuda]; remove it from [" + std::string(name) + "]");
      }
    }
    if (!cuda) return;
    spec->compiler = "nvcc";
    if (const toml::node* n = table.get("compiler")) {
      spec->compiler = read_string(*n, dotted(name, "compiler"));
      const bool known = spec->compiler == "nvcc" || std::find(kDeviceCompilers.begin(), kDeviceCompilers.end(),
                                                               spec->compiler) != kDeviceCompilers.end();
      if (!known) {
        std::string choices = "\"nvcc\" (default)";
        for (size_t i = 0; i < kDeviceCompilers.size(); ++i) {
          choices += (i + 1 == kDeviceCompilers.size() ? " or \"" : ", \"") + kDeviceCompilers[i] + "\"";
        }
        fail(dotted(name, "compiler"), "unknown compiler \"" + spec->compiler + "\"; use " + choices);
      }
    }
    const toml::node* device = table.get("device_sources");
    if (spec->compiler != "nvcc") {
      if (device == nullptr) {
        fail(dotted(name, "device_sources"),
             "missing; with compiler = \"" + spec->compiler + "\" list the files holding the __global__ "
             "functions, e.g. device_sources = [\"k_device.cu\"]");
      }
      spec->device_sources = read_paths(*device, dotted(name, "device_sources"), PathKind::kFile);
      if (spec->device_sources.empty()) fail(dotted(name, "device_sources"), "empty; list at least one file");
    } else if (device != nullptr || table.get("device_cflags") != nullptr) {
      fail(dotted(name, device != nullptr ? "device_sources" : "device_cflags"),
           "only used with compiler = \"nvrtc\" or \"nvcc-cubin\"; add one, or move the file into sources");
    }
    if (const toml::node* n = table.get("device_cflags")) {
      spec->device_cflags = read_string_list(*n, dotted(name, "device_cflags"));
    }
    parse_prelude(table, name, spec);
    parse_link_sources(table, name, spec);
    parse_kernels_used(table, name, spec);
    parse_launcher_compiler(table, name, spec);
    if (const toml::node* n = table.get("arch_specific")) {
      const toml::value<bool>* value = n->as_boolean();
      if (value == nullptr) fail_wrong_type(dotted(name, "arch_specific"), "true or false", *n);
      spec->arch_specific = value->get();
    }
  }

  // The prelude is NVRTC's precompiled header: a file compiled once per
  // content and kept by a compile server, so it must be a file of the kernel
  // and only NVRTC takes it (nvcc has no in-memory precompiled header).
  void parse_prelude(const toml::table& table, const char* name, BackendSpec* spec) const {
    const toml::node* n = table.get("prelude");
    if (n == nullptr) return;
    if (spec->compiler != "nvrtc") {
      fail(dotted(name, "prelude"), "only used with compiler = \"nvrtc\" (NVRTC keeps the precompiled "
                                    "header); set compiler = \"nvrtc\" or remove it");
    }
    spec->prelude = read_string(*n, dotted(name, "prelude"));
    check_path(spec->prelude, dotted(name, "prelude"), PathKind::kFile);
  }

  // Sources compiled apart to LTO-IR and linked by nvJitLink -lto: NVRTC
  // alone emits LTO-IR in-process, and a file compiled both ways would be
  // defined twice at the link.
  void parse_link_sources(const toml::table& table, const char* name, BackendSpec* spec) const {
    const toml::node* n = table.get("link_sources");
    if (n == nullptr) return;
    if (spec->compiler != "nvrtc") {
      fail(dotted(name, "link_sources"), "only used with compiler = \"nvrtc\" (NVRTC compiles them to LTO-IR "
                                         "for nvJitLink); set compiler = \"nvrtc\" or move them into device_sources");
    }
    spec->link_sources = read_paths(*n, dotted(name, "link_sources"), PathKind::kFile);
    for (const std::string& path : spec->link_sources) {
      const bool twice = std::find(spec->device_sources.begin(), spec->device_sources.end(), path) !=
                             spec->device_sources.end() || path == spec->prelude;
      if (twice) {
        fail(dotted(name, "link_sources"), "\"" + path + "\" is also in device_sources (or is the prelude): a file is "
                                           "either compiled with the others or linked apart; list it once");
      }
    }
  }

  // The kernels a linked program's launchers use: each is linked alone, side
  // by side, from the first link on (device/lto_link.py); without the list a
  // program's kernels are learned from a first link of all of them together.
  // They are looked up by name (extern "C"), so each is a C identifier.
  void parse_kernels_used(const toml::table& table, const char* name, BackendSpec* spec) const {
    const toml::node* n = table.get("kernels_used");
    if (n == nullptr) return;
    const std::string field = dotted(name, "kernels_used");
    if (spec->link_sources.empty()) {
      fail(field, "only used with link_sources (it chooses how nvJitLink links them); remove it, or list the "
                  "device sources linked apart in link_sources");
    }
    spec->kernels_used = read_string_list(*n, field);
    if (spec->kernels_used.empty()) fail(field, "empty; list the extern \"C\" kernels the launchers launch, or remove it");
    for (size_t i = 0; i < spec->kernels_used.size(); ++i) {
      const std::string& kernel = spec->kernels_used[i];
      if (!is_c_identifier(kernel)) {
        fail(field, "\"" + kernel + "\" is not a C identifier: name each kernel as its launcher looks it up "
                    "(an extern \"C\" __global__ function's name)");
      }
      if (std::find(spec->kernels_used.begin(), spec->kernels_used.begin() + i, kernel) !=
          spec->kernels_used.begin() + i) {
        fail(field, "\"" + kernel + "\" is listed twice; list each kernel once");
      }
    }
  }

  // Host launchers of a cubin are plain C++ unless they need nvcc (CUDA
  // headers, a library's host side): the choice changes the compiler, so it
  // is explicit rather than guessed from what the launcher includes.
  void parse_launcher_compiler(const toml::table& table, const char* name, BackendSpec* spec) const {
    const toml::node* n = table.get("launcher_compiler");
    if (spec->device_compiler().empty()) {
      if (n != nullptr) {
        fail(dotted(name, "launcher_compiler"),
             "only used with compiler = \"nvrtc\" or \"nvcc-cubin\" (with \"nvcc\" every source is "
             "compiled by nvcc already); remove it");
      }
      return;
    }
    spec->launcher_compiler = "c++";
    if (n == nullptr) return;
    spec->launcher_compiler = read_string(*n, dotted(name, "launcher_compiler"));
    if (spec->launcher_compiler != "c++" && spec->launcher_compiler != "nvcc") {
      fail(dotted(name, "launcher_compiler"), "unknown launcher compiler " + in_quotes(spec->launcher_compiler) +
                                                  "; use \"c++\" (default) or \"nvcc\"");
    }
  }

  // ---- header packages -----------------------------------------------------

  // Names from the known table only (header_packages.h): the table says where
  // a package keeps its headers, so a name it lacks could never be resolved.
  std::vector<std::string> read_header_packages(const toml::node& node) const {
    std::vector<std::string> names = read_string_list(node, "header_packages");
    std::vector<std::string> known;
    for (const KnownHeaderPackage& k : known_header_packages()) known.push_back(k.distribution);
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string field = indexed("header_packages", i);
      if (find_header_package(names[i]) == nullptr) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + in_quotes(k);
        const std::string near = closest_name(names[i], known);
        fail(field, "unknown header package " + in_quotes(names[i]) +
                        (near.empty() ? "" : "; did you mean " + in_quotes(near) + "?") +
                        " Known packages (pip distribution names): " + list +
                        "; for other headers, copy them into the kernel folder and list them in include_dirs");
      }
      if (!seen.insert(names[i]).second) fail(field, in_quotes(names[i]) + " is listed twice");
    }
    return names;
  }

  // ---- paths ---------------------------------------------------------------

  std::vector<std::string> read_paths(const toml::node& node, const std::string& field,
                                      PathKind kind) const {
    std::vector<std::string> paths = read_string_list(node, field);
    for (size_t i = 0; i < paths.size(); ++i) check_path(paths[i], indexed(field, i), kind);
    return paths;
  }

  // Paths reach the compiler's command line and the cache key, so they must
  // name something inside the kernel's folder: a kernel copied elsewhere must
  // still be complete, and a manifest must not be able to read arbitrary files.
  void check_path(const std::string& path, const std::string& field, PathKind kind) const {
    if (path.empty()) fail(field, "empty path");
    if (path.front() == '/') {
      fail(field, "absolute path " + in_quotes(path) + "; write it relative to the kernel folder");
    }
    for (const fs::path& part : fs::path(path)) {
      if (part == "..") {
        fail(field, "path " + in_quotes(path) +
                        " contains \"..\"; paths must stay inside the kernel folder");
      }
    }
    const fs::path full = fs::path(dir_) / path;
    std::error_code ec;
    const fs::file_status status = fs::status(full, ec);
    if (!fs::exists(status)) {
      fail(field, in_quotes(path) + " does not exist in " + dir_);
    }
    if (!free_of_links(path)) {  // a link may lead out: resolve both ends
      const fs::path real = fs::canonical(full, ec);
      std::error_code dir_ec;
      const fs::path real_dir = fs::canonical(dir_, dir_ec);
      if (ec || dir_ec || !is_inside(real, real_dir)) {
        fail(field, in_quotes(path) + " resolves to " + (ec ? std::string("?") : real.string()) +
                        ", outside the kernel folder " + dir_ +
                        "; copy it into the folder instead of linking to it");
      }
    }
    if (kind == PathKind::kDirectory && !fs::is_directory(status)) {
      fail(field, in_quotes(path) + " is not a directory");
    }
    if (kind == PathKind::kFile && !fs::is_regular_file(status)) {
      fail(field, in_quotes(path) + " is not a regular file");
    }
  }

  // True when no component of `path` (relative, without "..") below the
  // kernel folder is a symbolic link: then it cannot lead outside, and the
  // check needs one lstat() per component below the folder instead of
  // realpath()'s readlink() of every component from the root, for the folder
  // and each path (a fresh process parses the manifest on its first `get`).
  bool free_of_links(const std::string& path) const {
    fs::path at = dir_;
    for (const fs::path& part : fs::path(path)) {
      if (part.empty() || part == ".") continue;
      at /= part;
      struct stat st;
      if (::lstat(at.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) return false;
    }
    return true;
  }

  static bool is_inside(const fs::path& real, const fs::path& real_dir) {
    const std::string r = real.string();
    const std::string d = real_dir.string();
    if (r == d) return true;
    const std::string prefix = d.back() == '/' ? d : d + "/";
    return r.compare(0, prefix.size(), prefix) == 0;
  }

  // [tune] and each [[op]]'s tune key (tune_manifest.h).
  void parse_tunes(const toml::table& root, Manifest* m) const {
    m->tune = parse_tune_table(root);
    const toml::array& array = *root.get("op")->as_array();  // parse_op_tables checked it
    for (size_t i = 0; i < m->ops.size(); ++i) {
      m->ops[i].tune_params = parse_op_tune(*array[i].as_table(), indexed("op", i), m->tune);
    }
  }

  std::string file_;
  std::string dir_;
};

std::string format_error(const std::string& file, const std::string& field,
                         const std::string& message) {
  std::string out = file + ": ";
  if (!field.empty()) out += field + ": ";
  return out + message;
}

}  // namespace

ManifestError::ManifestError(std::string file, std::string field, const std::string& message)
    : std::runtime_error(format_error(file, field, message)),
      file_(std::move(file)),
      field_(std::move(field)) {}

Manifest parse_manifest(const std::string& manifest_path) {
  std::error_code ec;
  const fs::path file = fs::absolute(manifest_path, ec);
  const std::string file_name = ec ? manifest_path : file.lexically_normal().string();
  const std::optional<std::string> text = read_file(manifest_path);
  if (!text) {
    throw ManifestError(file_name, "", "cannot read the manifest (missing or unreadable file)");
  }
  return parse_manifest_text(*text, file_name, fs::path(file_name).parent_path().string());
}

Manifest parse_manifest_text(const std::string& text, const std::string& manifest_path,
                             const std::string& dir) {
  return ManifestParser(manifest_path, dir).parse(text);
}

void apply_config(Manifest* m, const Config& config) {
  const std::vector<std::string> defines = config_defines(config);
  // Appended after what the manifest wrote: the compiler takes the last -D of a name.
  for (std::vector<std::string>* flags : {&m->cflags, &m->cuda.device_cflags}) {
    flags->erase(flags->end() - static_cast<std::ptrdiff_t>(config_defines(m->config).size()), flags->end());
    flags->insert(flags->end(), defines.begin(), defines.end());
  }
  m->config = config;
}

Manifest with_config(const Manifest& manifest, const Config& config) {
  if (manifest.tune.empty()) throw ManifestError(manifest.file, "tune", "the kernel has no [tune] table");
  Config sorted = config;
  std::sort(sorted.begin(), sorted.end());
  std::string problem;
  try {
    problem = manifest.tune.check(sorted);
  } catch (const RuleError& e) {
    problem = e.what();
  }
  if (!problem.empty()) throw ManifestError(manifest.file, "tune", "config " + config_label(sorted) + ": " + problem);
  Manifest out = manifest;
  apply_config(&out, sorted);
  return out;
}

bool is_valid_kernel_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string kernel_name_from_folder(const std::string& folder) {
  std::string name;
  bool in_run = false;  // inside a run of characters outside [a-z0-9_]
  for (const char raw : folder) {
    char c = raw;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool kept = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (kept) {
      name += c;
    } else if (!in_run) {
      name += '_';
    }
    in_run = !kept;
  }
  if (!name.empty() && name[0] >= '0' && name[0] <= '9') name.insert(0, "_");
  return is_valid_kernel_name(name) ? name : std::string();
}

}  // namespace kreg
