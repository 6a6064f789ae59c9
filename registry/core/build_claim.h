// The build claim: one artifact's build under its lock, and its publish.
// Another process that wants the same key waits on the lock and finds the
// result in the cache (ARCHITECTURE.md, "Locking and publishing").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cache_store.h"
#include "file_lock.h"
#include "file_stamp.h"
#include "key.h"
#include "plan.h"

namespace kreg {

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

// An artifact keyed through a dependency record, planned outside make_plan:
// the cubin (registry/device/cubin_build.py), whose base key covers the
// scanned device files. It is claimed and published as a kernel library is.
ArtifactPlan recorded_artifact(const std::string& what, const std::string& kind, const Key& base,
                               const std::string& record_path, std::vector<LabelRoot> label_roots,
                               std::vector<std::string> scanned, bool force);

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
