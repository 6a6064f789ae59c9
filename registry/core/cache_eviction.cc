// Pins and eviction: which cache entries a live process has loaded, and the
// least-recently-used collection that removes only the others (see
// cache_store.h for the protocol).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <unordered_set>

#include "cache_fs.h"
#include "cache_store.h"
#include "dep_record.h"
#include "file_lock.h"
#include "toml_util.h"
#include "file_read.h"

namespace kreg {

namespace fs = std::filesystem;
using cache_fs::discard_dir;
using cache_fs::disk_bytes;
using cache_fs::errno_text;
using cache_fs::make_dirs;
using cache_fs::mtime_seconds;

namespace {

// flock() that retries when a signal interrupts it. Returns 0 or an errno.
int flock_retry(int fd, int operation) {
  for (;;) {
    if (::flock(fd, operation) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

// The pin file of an entry folder; opened read-write because on NFS (where
// flock() becomes a POSIX lock) an exclusive lock needs a writable file.
int open_used(const std::string& dir, bool create) {
  const std::string used = dir + "/used";
  return ::open(used.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
}

bool same_file(int fd, const std::string& path) {
  struct stat held, now;
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 &&
         held.st_dev == now.st_dev && held.st_ino == now.st_ino;
}

// When an entry was last used: its `used` file, else its build time, else
// (an unreadable entry) the folder's own mtime. Same rule as list().
int64_t last_used_of(const std::string& dir) {
  const int64_t used = mtime_seconds(dir + "/used");
  if (used != 0) return used;
  if (std::optional<std::string> text = read_file(dir + "/entry.toml")) {
    try {
      return entry_from_toml(*text).built_at;
    } catch (const std::exception&) {
      // fall through: a broken entry is as old as its folder
    }
  }
  return mtime_seconds(dir);
}

}  // namespace

Pin::Pin(Pin&& other) noexcept : fd_(other.fd_), key_(std::move(other.key_)) { other.fd_ = -1; }

Pin& Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    key_ = std::move(other.key_);
    other.fd_ = -1;
  }
  return *this;
}

Pin::~Pin() { release(); }

void Pin::release() {
  if (fd_ < 0) return;
  ::close(fd_);  // drops the shared lock
  fd_ = -1;
}

Pin CacheStore::pin(const std::string& key_hex) const {
  const std::string dir = object_dir(key_hex);
  const int fd = open_used(dir, /*create=*/true);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      throw std::runtime_error("cannot pin cache entry " + key_hex +
                               ": it is not in the cache (evicted by a gc, or never published); "
                               "call get() again to rebuild it");
    }
    throw std::runtime_error("cannot pin cache entry " + key_hex + ": cannot open " + dir +
                             "/used: " + errno_text(err) + "; check the cache folder's permissions");
  }
  // Blocks only while a gc() holds the exclusive lock to remove this entry.
  const int err = flock_retry(fd, LOCK_SH);
  if (err != 0) {
    ::close(fd);
    throw std::runtime_error("cannot pin cache entry " + key_hex + ": flock failed: " +
                             errno_text(err));
  }
  // If a gc() removed the entry between our open() and our lock, the file we
  // hold is in a folder that is gone: this pin would protect nothing.
  if (!same_file(fd, dir + "/used")) {
    ::close(fd);
    throw std::runtime_error("cannot pin cache entry " + key_hex +
                             ": a concurrent gc removed it while it was being pinned; call get() "
                             "again to rebuild it");
  }
  return Pin(fd, key_hex);
}

bool CacheStore::pinned(const std::string& key_hex) const {
  const int fd = open_used(object_dir(key_hex), /*create=*/false);
  if (fd < 0) return false;  // never pinned: pin() creates the file
  const int err = flock_retry(fd, LOCK_EX | LOCK_NB);
  ::close(fd);  // also drops the lock if we got it
  return err == EWOULDBLOCK;
}

GcReport CacheStore::gc(int64_t max_bytes, const std::vector<std::string>& keep) const {
  if (max_bytes < 0) {
    throw std::invalid_argument("gc: max_bytes is " + std::to_string(max_bytes) +
                                "; give a size of at least 0 (clear() removes everything)");
  }
  return evict(max_bytes, keep);
}

GcReport CacheStore::clear() const { return evict(-1, {}); }

GcReport CacheStore::evict(int64_t max_bytes, const std::vector<std::string>& keep) const {
  // One collector at a time: two would each count the same bytes and remove
  // more than needed between them. Held only for the scan and the removals.
  const std::string gc_lock = v1_ + "/locks/gc.lock";
  make_dirs(v1_ + "/locks");
  const int lock_fd = ::open(gc_lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    throw std::runtime_error("cannot open " + gc_lock + ": " + errno_text(errno) +
                             "; check the cache folder's permissions");
  }
  struct CloseOnExit {
    int fd;
    ~CloseOnExit() { ::close(fd); }
  } close_lock{lock_fd};
  if (const int err = flock_retry(lock_fd, LOCK_EX); err != 0) {
    throw std::runtime_error("cannot lock " + gc_lock + ": " + errno_text(err));
  }
  clean_staging();

  struct Candidate {
    std::string key;
    std::string dir;
    int64_t bytes;
    int64_t last_used;
  };
  std::vector<Candidate> candidates;
  GcReport report;
  std::error_code ec;
  for (fs::directory_iterator it(v1_ + "/objects", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec) || it->is_symlink(type_ec)) continue;
    const std::string dir = it->path().string();
    Candidate c{it->path().filename().string(), dir, disk_bytes(dir), last_used_of(dir)};
    report.total_bytes += c.bytes;
    candidates.push_back(std::move(c));
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.last_used != b.last_used ? a.last_used < b.last_used : a.key < b.key;
  });
  const std::unordered_set<std::string> kept(keep.begin(), keep.end());
  const std::string tmp = v1_ + "/tmp";
  for (const Candidate& c : candidates) {
    if (report.total_bytes <= max_bytes) break;
    if (kept.count(c.key) > 0) continue;
    const int fd = open_used(c.dir, /*create=*/true);
    if (fd < 0) {
      if (errno == ENOENT) report.total_bytes -= c.bytes;  // removed meanwhile (a corrupt lookup)
      continue;
    }
    if (flock_retry(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      ++report.kept_live;
      continue;
    }
    // Removed while we hold the exclusive lock: a pin() waiting on it will
    // find its file gone and refuse, rather than pin a vanished entry.
    if (same_file(fd, c.dir + "/used")) {
      discard_dir(c.dir, tmp);
      report.total_bytes -= c.bytes;
      report.freed_bytes += c.bytes;
      report.removed.push_back(c.key);
    }
    ::close(fd);
  }
  if (!report.removed.empty()) report.records_removed = prune_dep_records();
  return report;
}

int CacheStore::prune_dep_records() const {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(v1_ + "/deps", ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path path = it->path();
    if (path.extension() != ".toml") continue;
    // A build adding an entry rewrites the record under this lock.
    std::optional<FileLock> lock = FileLock::try_acquire(lock_path(path.stem().string()));
    if (!lock) continue;
    const std::optional<DepRecord> record = read_dep_record(path.string());
    const bool live = record && std::any_of(record->entries.begin(), record->entries.end(),
                                            [&](const DepEntry& e) { return fs::exists(object_dir(e.key)); });
    std::error_code remove_ec;
    if (!live && fs::remove(path, remove_ec)) ++removed;
  }
  return removed;
}

}  // namespace kreg
