#include "plan.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "codegen.h"
#include "hash.h"
#include "include_scan.h"
#include "launcher_header.h"
#include "toml_util.h"
#include "atomic_file.h"
#include "file_read.h"

namespace kreg {

namespace {

namespace fs = std::filesystem;

std::string fingerprint(const std::map<std::string, std::string>& env) {
  return hash_fields_hex({env.begin(), env.end()});  // a std::map iterates sorted, as Python's sorted(items)
}

// The memo vouches for a key only in the same environment: a header package
// upgraded, or found elsewhere, is another one (its files may be the same).
std::string fingerprint(const PlanFacts& facts) {
  if (facts.header_packages.empty()) return fingerprint(facts.env);
  std::vector<std::pair<std::string, std::string>> fields(facts.env.begin(), facts.env.end());
  for (const HeaderPackage& p : facts.header_packages) {
    std::string where = p.root;
    for (const std::string& d : p.include_dirs) where += '\0' + d;
    fields.emplace_back("package:" + p.name, p.version + '\0' + where);
  }
  return hash_fields_hex(fields);
}

// Each header package's metadata file: an upgrade that leaves every included
// header as it was still changes the key (its version), so `get` must look.
std::vector<FileStamp> package_stamps(const std::vector<HeaderPackage>& packages) {
  std::vector<FileStamp> stamps;
  for (const HeaderPackage& p : packages) {
    if (p.metadata.empty()) continue;
    if (std::optional<FileStamp> stamp = stamp_file(p.metadata)) stamps.push_back(std::move(*stamp));
  }
  return stamps;
}

// The file holds exactly `text`, or is written (atomically) to hold it. Compared
// as bytes: whatever a damaged file holds, anything else is written again.
void write_generated(const std::string& path, const std::string& text) {
  if (read_file(path) == text) return;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  fs::permissions(fs::path(path).parent_path(), fs::perms::owner_all, ec);
  write_file_atomic(path, text);
}

std::vector<FileStamp> stamp_all(const std::vector<std::string>& paths) {
  std::vector<FileStamp> stamps;
  for (const std::string& path : paths) {
    std::optional<FileStamp> stamp = stamp_file(path);
    if (!stamp) throw std::runtime_error("cannot read " + path + ": check that it exists and is readable");
    stamps.push_back(std::move(*stamp));
  }
  return stamps;
}

bool same_stamps(const std::vector<FileStamp>& a, const std::vector<FileStamp>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    // The recording time too: a re-verified racy stamp is written back, so a
    // fresh process does not re-hash it again.
    if (a[i].path != b[i].path || !(a[i].stat == b[i].stat) || a[i].content != b[i].content ||
        a[i].recorded_ns != b[i].recorded_ns) {
      return false;
    }
  }
  return true;
}

void look_up(const CacheStore& store, ArtifactPlan& artifact) {
  if (artifact.force || !artifact.key) return;
  Lookup found = store.lookup(artifact.key->digest.hex());
  artifact.hit = std::move(found.entry);
  artifact.miss_reason = std::move(found.miss_reason);
}

// Whether the memo's key was made from this manifest: always, for one read
// from a file (its stamp is among the memo's); for an inline manifest, which
// has no stamp, when the key's recorded text digest is this text's.
bool memo_has_manifest_text(const Memo& memo, const Manifest& m) {
  const std::optional<KeyInput> text = inline_manifest_input(m);
  if (!text) return true;
  return std::any_of(memo.inputs.begin(), memo.inputs.end(),
                     [&](const KeyInput& in) { return in.name == text->name && in.value == text->value; });
}

// The kernel library: the memo's key when its environment and every stamp
// still match (stat() calls only); else scan, hash, and ask the dependency record.
ArtifactPlan plan_lib(const Manifest& m, const PlanFacts& facts, const CacheStore& store, Plan& plan) {
  ArtifactPlan lib;
  lib.what = "lib";
  lib.kind = m.binding == "pybind" ? "module" : "kernel-lib";
  lib.force = facts.rebuild;
  lib.label_roots = key_label_roots(m, facts.registry_include, facts.header_packages);
  const Memo* memo = plan.memo ? &*plan.memo : nullptr;
  if (memo != nullptr && !facts.rebuild && memo->env == plan.env_fingerprint && memo->keys.count("lib") &&
      memo_has_manifest_text(*memo, m)) {
    std::vector<FileStamp> stamps = memo->stamps;
    if (check_stamps(stamps).changed.empty()) {
      std::optional<Digest> digest = Digest::from_hex(memo->keys.at("lib"));
      if (digest) {
        lib.key = Key{*digest, memo->inputs};
        lib.lock_key = memo->keys.at("lib");
        plan.stamps = std::move(stamps);
        plan.memo_vouched = true;
        return lib;
      }
    }
  }
  std::vector<std::string> sources = kernel_sources(m, facts.backend, facts.registry_include);
  for (const std::string& header : m.headers) sources.push_back((fs::path(m.dir) / header).lexically_normal().string());
  IncludeClosure closure = scan_include_closure(sources, include_dirs(m, facts.registry_include, facts.header_packages));
  std::set<std::string> files(closure.files.begin(), closure.files.end());
  if (m.inline_text.empty()) files.insert(m.file);  // an inline manifest is no file: its text is keyed as one
  lib.scanned.assign(files.begin(), files.end());
  plan.unresolved = closure.unresolved;
  plan.stamps = stamp_all(lib.scanned);  // before hashing: a save in between looks changed next time
  lib.base = kernel_lib_key(m, facts, lib.scanned);
  lib.lock_key = lib.base->digest.hex();
  lib.record_path = store.deps_path(lib.lock_key);
  if (!facts.rebuild) {
    if (std::optional<DepMatch> found = lib.match_record(lib.record_path)) {
      lib.key = std::move(found->key);
      plan.stamps.insert(plan.stamps.end(), found->stamps.begin(), found->stamps.end());
    }
  }
  return lib;
}

Memo memo_for(const Plan& plan, const Key& lib_key, const std::vector<FileStamp>& stamps,
              const std::map<std::string, ApartArtifact>& apart) {
  Memo memo;
  memo.kernel = plan.kernel;
  memo.backend = plan.backend;
  memo.env = plan.env_fingerprint;
  memo.keys["lib"] = lib_key.digest.hex();
  for (const auto& [name, artifact] : apart) {
    if (!artifact.key.empty()) memo.keys[name] = artifact.key;
  }
  memo.stamps = stamps;
  memo.inputs = lib_key.inputs;
  return memo;
}

bool same_memo(const std::optional<Memo>& before, const Memo& after) {
  return before && before->env == after.env && before->keys == after.keys &&
         same_stamps(before->stamps, after.stamps);
}

}  // namespace

std::optional<DepMatch> ArtifactPlan::match_record(const std::string& path) const {
  if (!base) return std::nullopt;
  return match_dep_record(path, *base, DepLabels(label_roots));
}

std::vector<std::string> key_changes(const std::optional<Memo>& memo, const Key& key, bool rebuild) {
  if (rebuild) return {"forced rebuild (rebuild=True)"};
  if (!memo) return {"no previous build recorded in this cache"};
  auto lib = memo->keys.find("lib");
  if (lib != memo->keys.end() && lib->second == key.digest.hex()) return {};
  std::vector<std::string> lines = diff_key_inputs(memo->inputs, key.inputs);
  // The launcher header is generated from the signatures: beside a signature's
  // own line, its digest changing says nothing more.
  const auto starts = [](const std::string& line, const char* prefix) { return line.rfind(prefix, 0) == 0; };
  if (std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return starts(l, "signature:"); })) {
    lines.erase(std::remove_if(lines.begin(), lines.end(), [&](const std::string& l) { return starts(l, "launcher_header:"); }),
                lines.end());
  }
  if (lines.empty()) lines.push_back("key format changed");
  return lines;
}

Plan make_plan(const Manifest& m, const PlanFacts& facts, const CacheStore& store) {
  Plan plan;
  plan.kernel = m.name;
  plan.backend = facts.backend;
  plan.env_fingerprint = fingerprint(facts);
  plan.package_stamps = package_stamps(facts.header_packages);
  // Per manifest path: two checkouts sharing a cache keep separate memos.
  // A config other than the default (registry.tune's candidates), a build of
  // some dtypes' units, and a checked build (core/derived_manifest.h) keep
  // their own memos: a plain get's memo must still vouch for the default's key.
  std::vector<std::pair<std::string, std::string>> memo_fields{{"manifest", m.file}};
  if (m.config != m.tune.default_config()) memo_fields.emplace_back("config", config_label(m.config));
  if (!m.variant.empty()) memo_fields.emplace_back("variant", m.variant);  // a checked build
  for (const std::string& kept : m.dtype_subset) memo_fields.emplace_back("dtype", kept);
  plan.memo_path = store.memo_path(m.name + "." + facts.backend + "." + hash_fields_hex(memo_fields).substr(0, 8));
  plan.memo = read_memo(plan.memo_path);

  plan.sources = kernel_sources(m, facts.backend, facts.registry_include);
  plan.built_directly = built_directly(m, facts.backend);
  plan.include_dirs = include_dirs(m, facts.registry_include, facts.header_packages);
  ArtifactPlan lib = plan_lib(m, facts, store, plan);
  look_up(store, lib);
  if (lib.key) plan.changes = key_changes(plan.memo, *lib.key, facts.rebuild);
  const bool generated = m.binding != "pybind";
  if (lib.missing()) {
    if (plan.memo && plan.memo->keys.count("lib")) {
      Lookup before = store.lookup(plan.memo->keys.at("lib"));
      if (before.entry) plan.previous_build_seconds = before.entry->build_seconds;
    }
    if (generated) {
      // Named by content (a function of the manifest, which the key covers).
      const std::string text = generate_launcher_header(m.name, m.ops);
      plan.launcher_header = store.generated_path("kreg_launchers_" + m.name + "_" +
                                                  hash_fields_hex({{"launchers", text}}).substr(0, 16) + ".h");
      write_generated(plan.launcher_header, text);
    }
  }
  plan.artifacts.push_back(std::move(lib));

  for (const OpSpec& op : m.ops) {
    plan.schemas[op.signature.name] = op.signature.canonical();
    auto& symbols = plan.launchers[op.signature.name];
    for (const std::string& dtype : op.dtypes) symbols.emplace_back(dtype, launcher_symbol(op, dtype));
  }
  if (!generated) {
    plan.memo_current = plan.lib().key && same_memo(plan.memo, memo_for(plan, *plan.lib().key, plan.stamps, {}));
    return plan;
  }
  for (const OpSpec& op : m.ops) {
    plan.namespaces[op.signature.name] = binding_namespace(op.signature, facts.backend);
    plan.binding_schemas[op.signature.name] = binding_schema(op.signature);
  }
  // One binding for every op and signature (codegen.h); planned unless this
  // process has it loaded already.
  const Key key = binding_key(facts.backend, facts.env, facts.registry_include);
  plan.binding_module = binding_module_name(facts.backend, key);
  const std::set<std::string> loaded(facts.loaded_namespaces.begin(), facts.loaded_namespaces.end());
  if (!loaded.count(plan.binding_module)) {
    ArtifactPlan binding;
    binding.what = "binding";
    binding.kind = "binding";
    binding.namespace_name = plan.binding_module;
    binding.key = key;
    binding.lock_key = key.digest.hex();
    look_up(store, binding);
    if (binding.missing()) {
      // A stable path per key: ccache and error messages see the same file every time.
      binding.source = store.generated_path(plan.binding_module + ".cpp");
      write_generated(binding.source, generate_shared_binding(facts.backend));
    }
    plan.artifacts.push_back(std::move(binding));
  }
  plan.memo_current = plan.lib().key && same_memo(plan.memo, memo_for(plan, *plan.lib().key, plan.stamps, {}));
  return plan;
}

std::vector<std::string> record_outcome(Plan& plan, const Outcome& outcome) {
  const ArtifactPlan& lib = plan.lib();
  const Key* key = outcome.lib_key ? &*outcome.lib_key : lib.key ? &*lib.key : nullptr;
  if (key == nullptr) throw std::logic_error("record_outcome: the kernel library's key is not known");
  std::vector<FileStamp> stamps = plan.stamps;
  if (outcome.lib_key) {
    // Rebuilt: the scanned files' stamps (taken before the build), then what the compiler reported.
    stamps.resize(lib.scanned.empty() ? stamps.size() : lib.scanned.size());
    stamps.insert(stamps.end(), outcome.lib_extra_stamps.begin(), outcome.lib_extra_stamps.end());
  }
  std::set<std::string> known;
  for (const FileStamp& s : stamps) known.insert(s.path);
  for (const auto& [name, artifact] : outcome.apart) {
    for (const FileStamp& s : artifact.stamps) {
      if (known.insert(s.path).second) stamps.push_back(s);
    }
  }
  std::vector<std::string> changes = key_changes(plan.memo, *key, lib.force);
  Memo memo = memo_for(plan, *key, stamps, outcome.apart);
  if (outcome.compiled || !same_memo(plan.memo, memo)) write_memo(plan.memo_path, memo);
  plan.stamps = std::move(stamps);
  plan.changes = changes;
  return changes;
}

std::string collect_garbage(const CacheStore& store, int64_t max_bytes, const std::vector<std::string>& keep) {
  try {
    store.gc(max_bytes, keep);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace kreg
