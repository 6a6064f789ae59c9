// The plan of one `get`: every artifact's key, hit or miss, what to build
// with which inputs, and why the key moved (the `changes` status() shows).
//
// One call (make_plan) does what used to be assembled field by field from
// Python: the memo's verdict, the include scan, the kernel library's base key
// and its dependency record, each binding's namespace and key, the verified
// cache lookups, and the generated sources a build needs. Python then acts on
// the plan: builds what misses (through torch or the compiler directly),
// loads, swaps the launcher tables, and records the outcome (record_outcome,
// one call again) so the next process finds it.
//
// Keys made here (the same as before this unit existed, so caches carry over):
//   kernel-lib / module   kernel, backend, kind, file:<label> per scanned file
//                         (manifest, sources, include closure), flags.cflags,
//                         flags.<backend>, flags.ldflags, include_dirs,
//                         device_compiler (host launchers of a cubin: "nvrtc"
//                         or "nvcc-cubin"), builder
//                         (direct builds), launcher_header (kernel-libs: the
//                         version of the launcher prototypes force-included
//                         into their sources, launcher_header.h), and the environment's env.* and
//                         toolchain.* inputs (a direct build leaves out those
//                         of torch, Python and nvcc: kNotDirectInputs)
//                         + the files its dependency record adds (dep_record.h)
//   binding               kind, backend, signature (canonical text), template,
//                         file:registry/include/kreg/abi.h, the environment
//                         less env.cuda_arch, toolchain.kernel_lib and nvcc's
//                         inputs (kNotBindingInputs: a binding is host C++)
// A binding's namespace (its module and TORCH_LIBRARY name) is
// "kreg_" + 16 hex of (signature, backend, template): one per signature.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache_store.h"
#include "dep_record.h"
#include "file_lock.h"
#include "file_stamp.h"
#include "key.h"
#include "manifest.h"
#include "memo.h"

namespace kreg {

// What Python knows about this process and machine.
struct PlanFacts {
  std::string backend;                        // "cpu" | "cuda", already chosen
  std::map<std::string, std::string> env;     // env.* and toolchain.* key inputs
  std::string registry_include;               // the kernel ABI headers' folder (absolute)
  std::vector<std::string> loaded_namespaces; // bindings registered in this process
  bool rebuild = false;                       // rebuild=True: build every artifact again
};

// One artifact of the plan: the kernel library ("lib") or an op's binding.
struct ArtifactPlan {
  std::string what;        // "lib" or the op's name
  std::string kind;        // "kernel-lib" | "module" | "binding"
  std::string lock_key;    // the build lock's key: the base key of a lib, else the key
  std::optional<Key> key;  // the artifact key; unset while only a build can tell (lib, no record match)
  std::optional<Entry> hit;  // a verified cache entry
  std::string miss_reason;   // why a cached entry was rejected (and removed)
  bool force = false;        // rebuild=True
  // lib only: its base key, dependency record and the roots labeling its files
  std::optional<Key> base;
  std::string record_path;
  std::vector<LabelRoot> label_roots;
  std::vector<std::string> scanned;  // files the include scan found (abs)
  // binding only: its module / TORCH_LIBRARY name and generated source (written on a miss)
  std::string namespace_name;
  std::string source;

  bool missing() const { return !hit.has_value(); }
  // The newest entry of `path` (a dependency record) that matches the files now.
  std::optional<DepMatch> match_record(const std::string& path) const;
};

struct Plan {
  std::string kernel;
  std::string backend;
  std::string env_fingerprint;  // digest of the environment, as the memo keeps it
  std::string memo_path;
  std::optional<Memo> memo;     // the previous build's, if readable
  bool memo_vouched = false;    // the memo's key held: no scan, no hashing
  std::vector<FileStamp> stamps;     // every file the lib key depends on (scan + record)
  std::vector<std::string> unresolved;  // includes the scan could not resolve
  std::vector<ArtifactPlan> artifacts;  // "lib" first, then each binding not loaded yet
  std::map<std::string, std::string> namespaces;  // op -> binding namespace (generated bindings)
  // op -> (dtype, launcher symbol) for every listed dtype
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> launchers;
  std::vector<std::string> sources;       // what the kernel library compiles
  bool built_directly = false;            // by the registry's own compiler call (built_directly())
  std::vector<std::string> include_dirs;  // its include path
  std::map<std::string, std::string> schemas;  // op -> its signature's canonical text
  std::vector<std::string> changes;  // why the lib key differs from the memo's (once it is known)
  std::string launcher_header;       // a lib build's force-included prototypes (written on a miss)
  std::optional<double> previous_build_seconds;  // a lib build's progress estimate
  bool memo_current = false;  // the memo already says what record_outcome would write

  const ArtifactPlan& lib() const { return artifacts.front(); }
};

// The whole plan. Throws std::runtime_error naming a file the key needs but
// cannot read. Writes nothing but generated sources (and removes a damaged
// cache entry it finds, as CacheStore::lookup does).
Plan make_plan(const Manifest& manifest, const PlanFacts& facts, const CacheStore& store);

// What Python did with a plan, for the memo.
struct Outcome {
  std::optional<Key> lib_key;             // the lib's key after its build, else the plan's
  std::vector<FileStamp> lib_extra_stamps;  // the build's extra files (with lib_key)
  std::string device_key;                 // NVRTC: the cubin's key
  std::vector<FileStamp> device_stamps;   // NVRTC: the device files
  bool compiled = false;
};

// Writes the memo when it would change and returns the changes: the plan's,
// or (after a build) the memo's inputs diffed against the built key's.
std::vector<std::string> record_outcome(Plan& plan, const Outcome& outcome);

// After a build: brings the cache under max_bytes (CacheStore::gc, keeping
// `keep`). Returns "" or why it could not run (the caller warns: a build that
// succeeded does not fail over a cache a little over its cap).
std::string collect_garbage(const CacheStore& store, int64_t max_bytes, const std::vector<std::string>& keep);

// Why `key` differs from the memo's lib key (the lines status() shows).
std::vector<std::string> key_changes(const std::optional<Memo>& memo, const Key& key, bool rebuild);

// How a backend's code is built: the one rule, asked from Python too.
// Device code in its own cubin: BackendSpec::device_compiler() of [cuda].
bool uses_device_module(const Manifest& manifest, const std::string& backend);
// Torch-free libraries the registry compiles itself (registry/build/direct.py):
// CPU kernel libraries and the host launchers of device code in a cubin.
bool built_directly(const Manifest& manifest, const std::string& backend);
// The key input "builder" of a directly built library: bump when the command
// direct.py runs changes.
inline constexpr const char* kDirectRecipe = "direct-1: c++ -std=c++20 -fPIC -shared -Wl,--no-undefined";

// The kernel-lib base key and binding pieces, for tools and tests.
Key kernel_lib_key(const Manifest& manifest, const PlanFacts& facts, const std::vector<std::string>& files);
std::string binding_namespace(const Signature& signature, const std::string& backend);
Key binding_key(const Signature& signature, const std::string& backend,
                const std::map<std::string, std::string>& env, const std::string& registry_include);
// The manifest's include path: the kernel folder, its include_dirs, the registry's headers.
std::vector<std::string> include_dirs(const Manifest& manifest, const std::string& registry_include);
// The sources a kernel library (or pybind module) compiles.
std::vector<std::string> kernel_sources(const Manifest& manifest, const std::string& backend,
                                        const std::string& registry_include);

// One artifact's build, claimed under its lock: another process that wants
// the same key waits, and finds the result in the cache.
struct Claim {
  std::optional<FileLock> lock;  // held while claimed; released by publish() or release()
  std::optional<Entry> hit;      // another process built it while we waited: nothing to do
  std::optional<Key> key;        // with hit: its key, and (lib) the record's extra files, stamped
  std::vector<FileStamp> extra_stamps;
  std::string staging;           // where to build (claimed only)
  bool busy() const { return !lock && !hit; }
};

// Tries the artifact's lock without blocking (busy() when another process
// holds it: poll). Under the lock, looks again (the dependency record, then
// the cache) unless forced; a hit releases the lock at once.
Claim try_claim(const CacheStore& store, const ArtifactPlan& artifact);

struct Published {
  Entry entry;
  Key key;
  std::vector<FileStamp> extra_stamps;  // lib: the files the compiler read beyond the scan
};

// Publishes a build from claim.staging: a lib's key from the compiler's list
// (deps_from_build), the entry (removing an older one of the key when forced),
// the dependency record; then releases the lock.
Published publish_claim(const CacheStore& store, ArtifactPlan& artifact, Claim& claim, Entry entry,
                        const std::vector<std::string>& reported, int64_t build_started_ns);

}  // namespace kreg
