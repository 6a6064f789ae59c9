#include "build_keys.h"

#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>

#include "codegen.h"
#include "hash.h"
#include "launcher_header.h"
#include "stable_binding_text.h"

namespace kreg {

namespace {

namespace fs = std::filesystem;

// What a directly built library does not depend on: it includes no torch or Python header.
const std::set<std::string> kNotDirectInputs = {
    "env.torch", "env.torch_cxx11_abi", "env.python", "env.cuda", "toolchain.nvcc",
    "toolchain.pytorch_nvcc", "toolchain.nvcc_host_cc", "env.cuda_arch"};

// What a directly built library whose launchers nvcc compiles depends on
// after all: nvcc itself (with its static CUDA runtime) and the arch of its
// device pass.
const std::set<std::string> kNvccLauncherInputs = {"toolchain.nvcc", "env.cuda_arch"};

// What the shared binding does not depend on (see binding_key): no device
// code, no kernel library, no nvcc; and, on torch's stable ABI and Python's
// limited API (stable_binding_text.h), not torch's or Python's exact version
// nor torch's C++ ABI. env.cuda counts by its major only (binding_key). Nor
// the host compiler's version: everything the binding exchanges with torch,
// Python and the kernel libraries is C, so one built by g++ 12 on one machine
// serves another with g++ 13 (a binding that needs a newer C or C++ runtime
// than a process has fails to load, and resolve.py builds it there instead).
const std::set<std::string> kNotBindingInputs = {
    "env.cuda_arch", "toolchain.kernel_lib",  "toolchain.nvcc", "toolchain.pytorch_nvcc", "toolchain.nvcc_host_cc",
    "env.torch",     "env.torch_cxx11_abi",   "env.python",     "toolchain.cxx"};

// "13" of "13.0": a CUDA major serves every minor of it (torch's own wheels
// are built per major's runtime; the binding includes no CUDA header).
std::string cuda_major(const std::string& version) { return version.substr(0, version.find('.')); }

std::string join(const std::string& dir, const std::string& relative) {
  return (fs::path(dir) / relative).lexically_normal().string();
}

const BackendSpec& backend_spec(const Manifest& m, const std::string& backend) {
  return backend == "cuda" ? m.cuda : m.cpu;
}

// A path relative to the first root holding it (lexically), else the path itself:
// key inputs keep readable names when a checkout moves (content still decides).
std::string label(const std::string& path, const std::vector<LabelRoot>& roots) {
  for (const LabelRoot& root : roots) {
    const std::string dir = fs::path(root.dir).lexically_normal().string();
    if (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/') {
      return root.prefix + path.substr(dir.size() + 1);
    }
  }
  return path;
}

// The shared binding's last key per backend. Its "source" input stands for the
// whole generated text (~22 KB), which depends only on the backend and the
// template version, yet every plan of a generated binding asks for the key
// (loaded or not, it names the module). So the text is generated and digested
// once per process, and the key made again only when another input (the
// environment, abi.h) has changed. Plans run in threads: the mutex also makes
// the first plans wait for one generation rather than each doing its own.
struct BindingKeyMemo {
  std::mutex mutex;
  std::string source;  // binding_source_input(backend), once
  Digest others;       // the digest of every input but the source, for `key`
  std::optional<Key> key;
};

// The value of the binding's "source" input: the generated text's digest and
// size, as a file input holds its content's digest. Not the text itself: key
// inputs are stored in the entry (core/cache_store.h) and read back on every
// lookup of it, and parsing 22 KB of TOML was most of a cached plan (0.4 of
// its 0.8 ms on the 2-core machine).
std::string binding_source_input(const std::string& backend) {
  const std::string text = generate_shared_binding(backend);
  return "xxh3-128:" + hash_bytes(text).hex() + " (" + std::to_string(text.size()) + " bytes generated)";
}

BindingKeyMemo& binding_key_memo(const std::string& backend) {
  static BindingKeyMemo cpu;
  static BindingKeyMemo cuda;
  if (backend == "cpu") return cpu;
  if (backend == "cuda") return cuda;
  generate_shared_binding(backend);  // throws std::invalid_argument naming the backends there are
  throw std::logic_error("binding_key: no key memo for backend " + backend);
}

// binding_source_input(backend), generated once per process.
std::string binding_source_of(const std::string& backend) {
  BindingKeyMemo& memo = binding_key_memo(backend);
  const std::lock_guard<std::mutex> lock(memo.mutex);
  if (memo.source.empty()) memo.source = binding_source_input(backend);
  return memo.source;
}

// The headers included are covered by content already; the version makes an
// upgrade a line of its own in status().changes ("package:nvidia-cutlass:
// 4.2.0.0 -> 4.3.0"), which a list of changed files would not say.
void add_packages(KeyBuilder& kb, const std::vector<HeaderPackage>& packages) {
  for (const HeaderPackage& p : packages) kb.add("package:" + p.name, p.version);
}

}  // namespace

std::vector<LabelRoot> key_label_roots(const Manifest& m, const std::string& registry_include,
                                       const std::vector<HeaderPackage>& packages) {
  std::vector<LabelRoot> roots{{"", m.dir}, {"registry/include/", registry_include}};
  for (const HeaderPackage& p : packages) roots.push_back({"pkg:" + p.name + "/", p.root});
  return roots;
}

bool uses_device_module(const Manifest& m, const std::string& backend) {
  return backend == "cuda" && !m.cuda.device_compiler().empty();
}

bool built_directly(const Manifest& m, const std::string& backend) {
  return m.binding != "pybind" && (backend == "cpu" || uses_device_module(m, backend));
}

std::vector<std::string> include_dirs(const Manifest& m, const std::string& registry_include,
                                      const std::vector<HeaderPackage>& packages) {
  std::vector<std::string> dirs{m.dir};
  for (const std::string& d : m.include_dirs) dirs.push_back(join(m.dir, d));
  for (const HeaderPackage& p : packages) {
    for (const std::string& d : p.include_dirs) dirs.push_back(fs::path(d).lexically_normal().string());
  }
  dirs.push_back(registry_include);
  return dirs;
}

std::vector<std::string> kernel_sources(const Manifest& m, const std::string& backend,
                                        const std::string& registry_include) {
  std::vector<std::string> sources;
  for (const std::string& s : backend_spec(m, backend).sources) sources.push_back(join(m.dir, s));
  if (uses_device_module(m, backend)) sources.push_back(registry_include + "/kreg/launch_runtime.cc");
  if (m.binding == "pybind") sources.push_back(join(m.dir, m.binding_source));
  return sources;
}

std::optional<KeyInput> inline_manifest_input(const Manifest& m) {
  if (m.inline_text.empty()) return std::nullopt;
  return KeyInput{"file:kernel.toml", hash_bytes(m.inline_text).hex()};
}

Key kernel_lib_key(const Manifest& m, const PlanFacts& facts, const std::vector<std::string>& files) {
  const std::vector<LabelRoot> roots = key_label_roots(m, facts.registry_include, facts.header_packages);
  const BackendSpec& spec = backend_spec(m, facts.backend);
  KeyBuilder kb;
  kb.add("kernel", m.name).add("backend", facts.backend).add("kind", m.binding == "pybind" ? "module" : "kernel-lib");
  for (const std::string& path : files) kb.add_file(label(path, roots), path);
  if (std::optional<KeyInput> text = inline_manifest_input(m)) kb.add(text->name, text->value);
  kb.add_list("flags.cflags", m.cflags);
  kb.add_list("flags." + facts.backend, spec.cflags);
  kb.add_list("flags.ldflags", m.ldflags);
  kb.add_list("include_dirs", m.include_dirs);
  add_packages(kb, facts.header_packages);
  // Host launchers only; the value names the device compiler ("nvrtc", "nvcc-cubin").
  if (uses_device_module(m, facts.backend)) kb.add("device_compiler", m.cuda.compiler);
  const bool nvcc_launchers = uses_device_module(m, facts.backend) && spec.launcher_compiler == "nvcc";
  if (nvcc_launchers) kb.add("launcher_compiler", spec.launcher_compiler);
  // The launcher prototypes and entries are force-included into every source
  // of a kernel-lib: their text, as generated, is part of what is compiled
  // (a generator change is a different compile with no version to bump).
  if (m.binding != "pybind") kb.add("launcher_header", hash_bytes(generate_launcher_header(m.name, m.ops)).hex());
  // Each op's signature (already in kernel.toml's digest), so that status().changes
  // says "signature:axpy: ... -> ..." rather than only "file:kernel.toml changed".
  if (m.binding != "pybind") {
    for (const OpSpec& op : m.ops) kb.add("signature:" + op.signature.name, op.signature.canonical());
  }
  // A build of some dtypes' units only (registry.tune's, core/dtype_units.h):
  // never the library a plain get builds, even where the files alone would agree.
  if (!m.dtype_subset.empty()) kb.add_list("dtype_subset", m.dtype_subset);
  const bool direct = built_directly(m, facts.backend);
  for (const auto& [name, value] : facts.env) {
    const bool left_out = direct && kNotDirectInputs.count(name) && !(nvcc_launchers && kNvccLauncherInputs.count(name));
    if (!left_out) kb.add(name, value);
  }
  return kb.finish();
}

Key device_key(const Manifest& m, const std::string& registry_include,
               const std::vector<std::pair<std::string, Digest>>& files, const std::string& recipe,
               const std::vector<std::string>& options,
               const std::vector<std::pair<std::string, std::string>>& compiler_inputs,
               const std::vector<HeaderPackage>& packages) {
  const std::vector<LabelRoot> roots = key_label_roots(m, registry_include, packages);
  KeyBuilder kb;
  kb.add("kernel", m.name).add("backend", "cuda").add("kind", "device");
  kb.add("recipe", recipe);
  for (const auto& [path, digest] : files) {
    kb.add_file_digest(label(fs::path(path).lexically_normal().string(), roots), digest);
  }
  kb.add_list("flags.device", options);
  kb.add_list("include_dirs", m.include_dirs);
  add_packages(kb, packages);
  for (const auto& [name, value] : compiler_inputs) kb.add(name, value);
  return kb.finish();
}

std::string binding_namespace(const Signature& signature, const std::string& backend) {
  // The binding's text, not a version bumped by hand: a binding that registers
  // differently registers elsewhere.
  return "kreg_" + hash_fields_hex({{"signature", signature.canonical()},
                                    {"backend", backend},
                                    {"binding", binding_source_of(backend)}})
                       .substr(0, 16);
}

Key binding_key(const std::string& backend, const std::map<std::string, std::string>& env,
                const std::string& registry_include) {
  BindingKeyMemo& memo = binding_key_memo(backend);
  KeyBuilder kb;
  kb.add("kind", "binding").add("backend", backend);
  // The registry headers the generated text includes: its digest below covers
  // the text, not what an #include brings in.
  for (const char* header : {"kreg/abi.h", "kreg/launcher_table.h"}) {
    kb.add_file(std::string("registry/include/") + header, registry_include + "/" + header);
  }
  // The oldest torch whose stable ABI it targets: what it needs of torch.
  kb.add("stable_abi", std::string("torch ") + kStableTargetTorch + " and later, Python 3.10 and later");
  for (const auto& [name, value] : env) {
    // Host C++ only: no device code, no kernel library, and no nvcc (a binding
    // includes no CUDA header and reaches the stream through torch's shims, so it
    // is built as plain C++ with or without a toolkit; an nvcc upgrade leaves it be).
    if (name == "env.cuda") {
      kb.add("env.cuda_major", cuda_major(value));
    } else if (kNotBindingInputs.count(name) == 0) {
      kb.add(name, value);
    }
  }
  // Inputs are kept sorted by name, so adding the source last hashes the same
  // bytes as adding it first: the memo changes no key.
  const Digest others = kb.finish().digest;
  const std::string source = binding_source_of(backend);
  const std::lock_guard<std::mutex> lock(memo.mutex);
  if (!memo.key || memo.others != others) {
    kb.add("source", source);  // the text compiled: no version bump can be forgotten
    memo.key = kb.finish();
    memo.others = others;
  }
  return *memo.key;
}

std::string binding_module_name(const std::string& backend, const Key& key) {
  return "kreg_binding_" + backend + "_" + key.digest.hex().substr(0, 16);
}

}  // namespace kreg
