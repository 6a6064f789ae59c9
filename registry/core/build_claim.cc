#include "build_claim.h"

#include <stdexcept>

namespace kreg {

ArtifactPlan recorded_artifact(const std::string& what, const std::string& kind, const Key& base,
                               const std::string& record_path, std::vector<LabelRoot> label_roots,
                               std::vector<std::string> scanned, bool force) {
  ArtifactPlan artifact;
  artifact.what = what;
  artifact.kind = kind;
  artifact.lock_key = base.digest.hex();
  artifact.base = base;
  artifact.record_path = record_path;
  artifact.label_roots = std::move(label_roots);
  artifact.scanned = std::move(scanned);
  artifact.force = force;
  return artifact;
}

Claim try_claim(const CacheStore& store, const ArtifactPlan& artifact) {
  Claim claim;
  claim.lock = FileLock::try_acquire(store.lock_path(artifact.lock_key));
  if (!claim.lock) return claim;
  if (!artifact.force) {
    // Another process may have built (and recorded) it while we waited.
    std::optional<Key> key = artifact.key;
    std::vector<FileStamp> extra;
    if (artifact.base) {
      // The record's newest matching entry, else the base key itself (a build
      // that read nothing beyond the scanned files has the base's key).
      std::optional<DepMatch> found = artifact.match_record(artifact.record_path);
      key = found ? std::optional<Key>(found->key) : artifact.base;
      if (found) extra = std::move(found->stamps);
    }
    if (key) {
      Lookup found = store.lookup(key->digest.hex());
      if (found.entry) {
        claim.lock->release();
        claim.lock.reset();
        claim.hit = std::move(found.entry);
        claim.key = std::move(key);
        claim.extra_stamps = std::move(extra);
        return claim;
      }
    }
  }
  claim.staging = store.make_staging_dir();
  return claim;
}

Published publish_claim(const CacheStore& store, ArtifactPlan& artifact, Claim& claim, Entry entry,
                        const std::vector<std::string>& reported, int64_t build_started_ns) {
  if (!claim.lock) throw std::logic_error("publish_claim: the build was not claimed");
  Published out;
  std::optional<DepEntry> record_entry;
  if (artifact.base) {
    BuildDeps deps = deps_from_build(*artifact.base, DepLabels(artifact.label_roots), reported,
                                     artifact.scanned, build_started_ns);
    out.key = std::move(deps.key);
    out.extra_stamps = std::move(deps.stamps);
    record_entry = std::move(deps.entry);
  } else {
    out.key = *artifact.key;
  }
  if (artifact.force) store.remove(out.key.digest.hex());
  entry.key = out.key.digest.hex();
  entry.inputs = out.key.inputs;
  out.entry = store.publish(claim.staging, std::move(entry));
  // After publishing: a record never names what is not there yet.
  if (record_entry) add_dep_entry(artifact.record_path, *artifact.base, *record_entry);
  artifact.key = out.key;
  claim.lock->release();
  claim.lock.reset();
  return out;
}

}  // namespace kreg
