// Dependency records: the files a compiler read that the include scan could
// not see, kept in the cache so that any process can reconstruct an
// artifact's key from content alone (ccache's direct mode, "manifests").
//
// The include scan (include_scan.h) cannot follow `#define H "val.h"` then
// `#include H`. Its key, the *base key*, therefore cannot name the artifact:
// two builds with the same scanned files may have read different val.h. The
// base key instead names a record in the cache; each entry of the record
// lists the extra files one build's compiler reported, with their content
// digests, and the key that build was published under:
//
//   artifact key = the base key's inputs + "file:<label>" = digest, per extra
//                  file (no extra file: the artifact key is the base key)
//
// A `get` computes the base key, reads its record and uses the newest entry
// whose files all still have those digests (hashing them). No entry matches:
// build, then add an entry from the compiler's list. Several entries are kept,
// so going back to earlier content finds its build again.
//
// Labels name files independently of where a checkout lives: the first root
// (prefix, folder) holding the file gives "<prefix><path inside folder>". The
// registry uses ("", kernel folder) and ("registry/include/", its include
// folder), the same labels as the key's file: inputs, so two checkouts at
// different paths share records and artifacts.
//
// Known limit, shared with ccache: a header that would now shadow a recorded
// one earlier in the include path (a new file) is not noticed; edit a scanned
// file or pass rebuild=True.
//
// v1/deps/<base key>.toml, format 1 (written whole, atomically, under the base
// key's build lock):
//   format = 1
//   base   = "<32 hex>"                      # the base key this record belongs to
//   [[entry]]                                # newest first, at most kDepRecordMaxEntries
//   key    = "<32 hex>"                      # the artifact key of that build
//   files  = { "val.h" = "<32 hex>", ... }   # label = XXH3-128 of the content
// A record of another format, for another base, or unreadable reads as empty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "file_stamp.h"
#include "hash.h"
#include "key.h"

namespace kreg {

inline constexpr int kDepRecordFormat = 1;
// Enough to go back and forth between a few versions of a header; a record
// stays a few hundred bytes.
inline constexpr size_t kDepRecordMaxEntries = 8;

struct DepFile {
  std::string label;
  Digest content;
};

struct DepEntry {
  std::string key;             // hex
  std::vector<DepFile> files;  // sorted by label
};

struct DepRecord {
  std::string base;              // hex
  std::vector<DepEntry> entries;  // newest first
};

std::string dep_record_to_toml(const DepRecord& record);
// Throws std::runtime_error with a reason on malformed text or another format.
DepRecord dep_record_from_toml(const std::string& text);
// nullopt for a missing or unreadable file, garbage, or another format.
std::optional<DepRecord> read_dep_record(const std::string& path);

struct LabelRoot {
  std::string prefix;  // "" or ending in '/'
  std::string dir;     // absolute
};

class DepLabels {
 public:
  explicit DepLabels(std::vector<LabelRoot> roots);
  // The label of `path` (symlinks resolved on both sides), or nullopt when no
  // root holds it.
  std::optional<std::string> label(const std::string& path) const;
  // The file a label names in this checkout; nullopt for a label no root can
  // hold (absolute, or with a ".." component).
  std::optional<std::string> path(const std::string& label) const;

 private:
  std::vector<LabelRoot> roots_;     // as given
  std::vector<std::string> real_;    // each root's folder, symlinks resolved
};

// The base key's inputs plus one "file:<label>" input per file.
Key key_with_files(const Key& base, const std::vector<DepFile>& files);

// What a record says about the files on disk now.
struct DepMatch {
  Key key;                        // the artifact key
  std::vector<FileStamp> stamps;  // the entry's files, stamped (for the per-checkout memo)
};

// Reads the record at `path` and returns the newest entry of it whose files
// all have their recorded digests now; nullopt when none does.
std::optional<DepMatch> match_dep_record(const std::string& path, const Key& base,
                                         const DepLabels& labels);

struct BuildDeps {
  Key key;                        // the artifact key to publish under
  std::vector<FileStamp> stamps;  // the extra files, stamped
  std::optional<DepEntry> entry;  // what to add to the record; nullopt: record nothing
};

// The artifact key of a build from the compiler's dependency list: the files
// of `reported` that are not in `scanned` (compared with symlinks resolved)
// and that a root holds are labeled and hashed. A file modified at or after
// `build_started_ns` (CLOCK_REALTIME), or gone, may not be what the compiler
// read: then the key gets a unique "deps.unverified" input so no process ever
// reuses the artifact, that file's stamp is marked stale (the next `get`
// looks again), and no entry is returned.
BuildDeps deps_from_build(const Key& base, const DepLabels& labels,
                          const std::vector<std::string>& reported,
                          const std::vector<std::string>& scanned, int64_t build_started_ns);

// Puts `entry` first in the record at `path` for `base`, dropping an older
// entry with the same key and the oldest beyond kDepRecordMaxEntries, and
// writes it atomically. Callers hold the base key's build lock, so no entry
// is lost to a concurrent writer.
void add_dep_entry(const std::string& path, const Key& base, const DepEntry& entry);

}  // namespace kreg
