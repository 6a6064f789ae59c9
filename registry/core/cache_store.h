// The on-disk cache: content-addressed build artifacts, published atomically.
//
// Layout under the cache root, version 1 (everything under v1/; a layout
// change that old readers would misread bumps kCacheLayout to "v2", so
// both live side by side). cache_layout() is the one place these names are
// spelled; Python reads them from _core.CACHE_LAYOUT.
//
//   v1/objects/<key>/          one published build, immutable once visible
//       entry.toml             the index record (below); written last, before the rename
//       <artifact>.so          the library or module the build produced
//       used                   its mtime is the last use; shared flock()s on it are pins
//   v1/tmp/<pid>-<random>/     private staging folders; a build happens here
//   v1/locks/<key>.lock        flock() files serializing builds of one key
//   v1/locks/gc.lock           serializes gc() and clear() across processes
//   v1/memo/<kernel>.<backend>.<8 hex of the manifest path>.toml
//                              the last build's file stamps and keys (memo.h)
//   v1/deps/<base key>.toml    what the compiler read beyond the include scan,
//                              per base key (see dep_record.h); gc() and clear()
//                              remove a record once no entry it names is left
//   v1/tuned/<kernel>.<backend>.<16 hex of the lib key>.table
//                              registry.tune's winners for one kernel version (tuned_table.h)
//   v1/generated/              binding sources and launcher headers (plan.h),
//                              named by content or signature
//   v1/toolchains.toml         compiler identities, by the binary's stat (toolchain.h)
//   v1/cuda_arch.txt           the GPU answer per machine identity (registry/environment.py)
//   v1/inline/<name>/          %%kernel cells written out as kernels (registry/notebook/magics.py)
//   v1/ccache-bin/<16 hex>/    the compiler wrapper ccache is reached through (registry/builder/ccache.py)
//
// Publishing: a build writes into a staging folder, the store writes
// entry.toml there (with the artifact's size and XXH3-128) and renames the
// folder to objects/<key>. Readers see either nothing or a complete entry.
// A lookup re-verifies size and digest, so a truncated or altered artifact
// is a miss (reported with the reason), never a bad load. That check is
// also what makes a crash safe: nothing is fsynced (install() says why),
// so an entry published just before a power loss may come back short, and
// is then a miss that rebuilds.
//
// entry.toml, format 1:
//   format        = 1
//   key           = "<32 hex>"
//   kernel        = "axpy"
//   backend       = "cpu" | "cuda"
//   kind          = "kernel-lib" | "binding" | "module"
//   artifact      = "libkreg_axpy_cpu.so"     # file name inside the folder
//   artifact_size = 123456
//   artifact_xxh3 = "<32 hex>"
//   built_at      = 1764500000               # unix seconds
//   build_seconds = 1.25
//   deps          = ["/abs/path", ...]       # the compiler's own dependency list
//   [inputs]                                 # the key's inputs, name = value
// An entry of another format version is treated as a miss and rebuilt.
//
// Eviction and pins. objects/<key>/used does two jobs: its mtime is the
// entry's last use (touch()), and it carries the pins. A process that loaded
// an artifact holds a shared flock() on `used` for the rest of its life (a
// Pin); gc() removes an entry only while holding an exclusive, non-blocking
// flock() on the same file, so an entry some live process has mapped is never
// removed, and a process that dies, however it dies, unpins by the kernel
// dropping its locks. pin() re-checks after locking that its file is still
// the entry's, so a pin can never land on an entry that gc() just removed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hash.h"
#include "key.h"

namespace kreg {

inline constexpr int kEntryFormat = 1;
inline constexpr const char* kCacheLayout = "v1";

// name -> path relative to the cache root, for each place in the layout above
// ("objects", "tmp", "locks", "memo", "deps", "generated", "toolchains",
// "cuda_arch", "inline", "ccache_bin", "tuned"; "root" is the layout folder itself).
const std::vector<std::pair<std::string, std::string>>& cache_layout();

struct Entry {
  int format = kEntryFormat;
  std::string key;  // hex
  std::string kernel;
  std::string backend;
  std::string kind;
  std::string artifact;
  int64_t artifact_size = 0;
  std::string artifact_xxh3;
  int64_t built_at = 0;
  double build_seconds = 0;
  std::vector<std::string> deps;
  std::vector<KeyInput> inputs;
  int64_t last_used = 0;  // not stored in entry.toml; the mtime of the folder's "used" file
  int64_t disk_bytes = 0;  // not stored; filled in by list()
  std::string dir;         // not stored; absolute folder path
};

std::string entry_to_toml(const Entry& entry);
// Throws std::runtime_error with a reason on malformed text or another format.
Entry entry_from_toml(const std::string& text);

// A shared lock on one entry's `used` file, held until release() or
// destruction. Move-only. Not inherited across exec (O_CLOEXEC); a forked
// child shares it with its parent, and the entry stays pinned while either lives.
class Pin {
 public:
  Pin() = default;
  Pin(Pin&& other) noexcept;
  Pin& operator=(Pin&& other) noexcept;
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  ~Pin();

  const std::string& key() const { return key_; }
  bool held() const { return fd_ >= 0; }
  void release();

 private:
  friend class CacheStore;
  Pin(int fd, std::string key) : fd_(fd), key_(std::move(key)) {}
  int fd_ = -1;
  std::string key_;
};

// What gc() or clear() did.
struct GcReport {
  std::vector<std::string> removed;  // keys, least recently used first
  int64_t freed_bytes = 0;
  int kept_live = 0;        // entries it would have removed, kept: pinned by a live process
  int64_t total_bytes = 0;  // what objects/ holds afterwards
  int records_removed = 0;  // dependency records none of whose builds is left
};

struct Lookup {
  std::optional<Entry> entry;  // set on a verified hit
  std::string miss_reason;     // empty on a hit or a plain absence
};

class CacheStore {
 public:
  // Creates root/v1 and its folders with mode 0700 when missing.
  explicit CacheStore(std::string root);

  const std::string& root() const { return root_; }
  std::string object_dir(const std::string& key_hex) const;
  std::string lock_path(const std::string& key_hex) const;
  std::string memo_path(const std::string& name) const;
  // The dependency record of a base key (dep_record.h).
  std::string deps_path(const std::string& base_key_hex) const;

  // A file under v1/generated (the folder is created by whoever writes it).
  std::string generated_path(const std::string& name) const;

  // A fresh private staging folder under v1/tmp.
  std::string make_staging_dir() const;

  // Hashes the artifact in `staging_dir`, writes entry.toml, renames the folder
  // to objects/<key>. If another process published the key first, the staging
  // folder is removed and theirs is kept. Returns the published entry.
  Entry publish(const std::string& staging_dir, Entry entry) const;

  // Verifies format, key, artifact size and digest. A corrupt entry is moved
  // aside (deleted) and reported through miss_reason.
  Lookup lookup(const std::string& key_hex) const;

  // Publishes an entry that was built elsewhere (fetched from a remote
  // cache): its entry.toml text and its artifact's bytes. They are written
  // to a staging folder and verified there with lookup()'s rules (format,
  // key, artifact name, size, XXH3) before the rename makes them visible, so
  // nothing unverified is ever published: on failure nothing is left behind
  // and miss_reason says why. An entry already published under the key is
  // kept, as publish() does.
  Lookup adopt(const std::string& key_hex, const std::string& record,
               const std::string& artifact) const;

  // Marks an entry as used now (touches objects/<key>/used): drives LRU.
  void touch(const std::string& key_hex) const;

  // Pins a published entry for as long as the Pin lives (see the top of this
  // file). Blocks only while a gc() is removing that very entry. Throws
  // std::runtime_error when the entry is not (or no longer) in the cache.
  Pin pin(const std::string& key_hex) const;
  // Whether some process (this one included) holds a pin on the entry now.
  bool pinned(const std::string& key_hex) const;

  // When objects/ holds more than max_bytes, removes entries least recently
  // used first until it fits, skipping pinned ones and the keys in `keep`.
  // Also removes staging folders of dead processes, and, after removing
  // entries, the dependency records that name no entry left.
  GcReport gc(int64_t max_bytes, const std::vector<std::string>& keep = {}) const;
  // Removes every entry that is not pinned.
  GcReport clear() const;

  std::vector<Entry> list() const;
  void remove(const std::string& key_hex) const;
  // Removes staging folders whose creating process is gone.
  int clean_staging() const;

 private:
  GcReport evict(int64_t max_bytes, const std::vector<std::string>& keep) const;
  // Removes deps/<base>.toml records whose every entry's key is gone from
  // objects/ (or that cannot be read): they could only ever miss. Each is
  // removed under its base key's build lock, skipped while a build holds it.
  int prune_dep_records() const;
  // Renames a verified staging folder to objects/<key> (keeping another
  // process's verified entry if it got there first); no fsync.
  Entry install(const std::string& staging_dir, Entry entry) const;

  std::string root_;
  std::string v1_;
};

}  // namespace kreg
