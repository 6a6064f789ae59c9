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
// The keys are made in build_keys.h; a miss is claimed and published
// through build_claim.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build_keys.h"
#include "cache_store.h"
#include "dep_record.h"
#include "file_stamp.h"
#include "key.h"
#include "manifest.h"
#include "memo.h"

namespace kreg {

// One artifact of the plan: the kernel library ("lib") or the shared binding ("binding").
struct ArtifactPlan {
  std::string what;        // "lib" or "binding"
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
  // binding only: its module name and generated source (written on a miss)
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
  std::vector<FileStamp> package_stamps;  // header packages' metadata files: watched, never keyed
  std::vector<std::string> unresolved;  // includes the scan could not resolve
  std::vector<ArtifactPlan> artifacts;  // "lib" first, then the shared binding unless loaded
  std::map<std::string, std::string> namespaces;  // op -> its namespace (kreg_define'd at run time)
  std::map<std::string, std::string> binding_schemas;  // op -> the schema its namespace's call has
  std::string binding_module;  // the shared binding's module name (binding_module_name)
  // op -> (dtype, launcher symbol) for every listed dtype
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> launchers;
  std::vector<std::string> sources;       // what the kernel library compiles
  bool built_directly = false;            // by the registry's own compiler call (built_directly())
  std::vector<std::string> include_dirs;  // its include path
  std::map<std::string, std::string> schemas;  // op -> its signature's canonical text
  std::vector<std::string> changes;  // why the lib key differs from the memo's (once it is known)
  std::string launcher_header;       // a lib build's force-included prototypes and op entries (written on a miss)
  std::optional<double> previous_build_seconds;  // a lib build's progress estimate
  bool memo_current = false;  // the memo already says what record_outcome would write

  const ArtifactPlan& lib() const { return artifacts.front(); }
};

// The whole plan. Throws std::runtime_error naming a file the key needs but
// cannot read. Writes nothing but generated sources (and removes a damaged
// cache entry it finds, as CacheStore::lookup does).
Plan make_plan(const Manifest& manifest, const PlanFacts& facts, const CacheStore& store);

// An artifact keyed apart from the plan (the cubin of device code with its
// own compiler: registry/device/in_get.py): its key, and the stamps of the
// files that key covers, which the memo watches beside the plan's.
struct ApartArtifact {
  std::string key;
  std::vector<FileStamp> stamps;
};

// What Python did with a plan, for the memo.
struct Outcome {
  std::optional<Key> lib_key;             // the lib's key after its build, else the plan's
  std::vector<FileStamp> lib_extra_stamps;  // the build's extra files (with lib_key)
  std::map<std::string, ApartArtifact> apart;  // by name ("device"), as the memo's keys name them
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

}  // namespace kreg
