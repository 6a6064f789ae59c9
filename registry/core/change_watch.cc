#include "change_watch.h"

#include <pthread.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <unordered_map>
#include <unordered_set>

namespace kreg {

namespace {

// statfs() f_type of filesystems whose every change goes through this
// machine's kernel, and so raises inotify events. Anything else (NFS, SMB,
// FUSE, 9p, virtiofs, ...) keeps the stat() per file.
constexpr long kLocalFilesystems[] = {
    0xEF53,      // ext2, ext3, ext4
    0x58465342,  // xfs
    0x9123683E,  // btrfs
    0x01021994,  // tmpfs
    0x858458F6,  // ramfs
    0x794C7630,  // overlayfs (containers; edits through the overlay mount)
    0xF2F52010,  // f2fs
    0x2FC12FC1,  // zfs
};

// A stamped file: any event on its inode (whichever link it was written through).
constexpr uint32_t kFileMask = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW;
// A folder on the path: names coming and going. Only events of the folder
// itself: asking for its children's IN_MODIFY would make the kernel flag every
// cached entry of the folder (2.6 ms for a busy /tmp on the 2-core VM).
constexpr uint32_t kFolderMask =
    IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
// Events about the watched object itself, whatever it is: always a change.
constexpr uint32_t kSelfEvents = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT;

bool on_local_filesystem(const std::string& path) {
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return false;
  for (long type : kLocalFilesystems) {
    if (static_cast<long>(fs.f_type) == type) return true;
  }
  return false;
}

// Absolute and normalized: no "." or ".." component, no doubled slash (a
// trailing one names no regular file, which add() then refuses).
bool is_normal_absolute(const std::string& path) {
  return !path.empty() && path[0] == '/' && std::filesystem::path(path).lexically_normal().string() == path;
}

// The last path component, and the folder holding it ("/" for "/x").
std::pair<std::string, std::string> split(const std::string& path) {
  std::string::size_type slash = path.rfind('/');
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

class Watch {
 public:
  static Watch& instance() {
    // Never destroyed: a get may run during interpreter shutdown.
    static Watch* watch = new Watch();
    return *watch;
  }

  std::mutex mu;
  uint64_t generation = 1;

  // Watches every file of `stamps`, its folder and the folders above; false
  // (and the set stays unwatched) when any of them cannot be watched.
  bool add(const std::vector<FileStamp>& stamps) {
    if (fd_ < 0) fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0) return false;
    for (const FileStamp& stamp : stamps) {
      const std::string& path = stamp.path;
      if (!is_normal_absolute(path)) return false;
      auto [folder, name] = split(path);
      if (!watch_folder(folder)) return false;
      // Not a symlink (the watch would see the link, not its target's edits).
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !on_local_filesystem(path)) return false;
      int wd = ::inotify_add_watch(fd_, path.c_str(), kFileMask | IN_MASK_ADD);
      if (wd < 0) return false;  // ENOSPC (max_user_watches), EACCES, ...
      targets_[wd].is_file = true;
      targets_[folders_[folder]].names.insert(name);
    }
    return true;
  }

  // Reads every pending event; returns the epoch, which counts the events
  // that may have changed a watched file's stat.
  uint64_t drain() {
    alignas(inotify_event) char buffer[4096];
    for (;;) {
      ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) ++epoch_;  // cannot tell: the stamps are stat'ed
      if (n <= 0) break;
      for (char* p = buffer; p < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(p);
        handle(*event);
        p += sizeof(inotify_event) + event->len;
      }
    }
    return epoch_;
  }

 private:
  struct Target {
    bool is_file = false;
    std::unordered_set<std::string> names;  // of a folder: the children on a watched path
  };

  Watch() { ::pthread_atfork(nullptr, nullptr, &Watch::after_fork_in_child); }

  // A forked child shares the parent's inotify queue: reading it would take
  // events the parent has yet to see. The child drops it (closing only its
  // own descriptor) and watches anew on its next check.
  static void after_fork_in_child() {
    Watch& w = instance();
    new (&w.mu) std::mutex();  // another thread may have held it at the fork
    if (w.fd_ >= 0) ::close(w.fd_);
    w.fd_ = -1;
    w.targets_.clear();
    w.folders_.clear();
    ++w.generation;
  }

  // Watches `folder` and, by its name, every folder above it; true when
  // all of them are real folders (no symlink) on local filesystems.
  bool watch_folder(const std::string& folder) {
    if (folders_.count(folder)) return true;
    std::string name;
    if (folder != "/") {
      auto [parent, own_name] = split(folder);
      if (!watch_folder(parent)) return false;
      name = own_name;
    }
    struct stat st;
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !on_local_filesystem(folder)) return false;
    int wd = ::inotify_add_watch(fd_, folder.c_str(), kFolderMask | IN_MASK_ADD);
    if (wd < 0) return false;
    targets_[wd];  // names are added as paths below it are watched
    folders_[folder] = wd;
    if (!name.empty()) targets_[folders_[split(folder).first]].names.insert(name);
    return true;
  }

  void handle(const inotify_event& event) {
    if (event.mask & IN_Q_OVERFLOW) {  // events were lost
      ++epoch_;
      return;
    }
    auto it = targets_.find(event.wd);
    if (it == targets_.end()) return;
    const Target& target = it->second;
    if (target.is_file || (event.mask & kSelfEvents) ||
        (event.len > 0 && target.names.count(event.name))) {
      ++epoch_;
    }
    if (event.mask & IN_IGNORED) {
      // The watch is gone (its file deleted or replaced, its filesystem
      // unmounted): every set adds its watches again on its next check.
      targets_.erase(it);
      folders_.clear();
      ++generation;
    }
  }

  int fd_ = -1;
  uint64_t epoch_ = 0;
  std::unordered_map<int, Target> targets_;      // watch descriptor -> what it watches
  std::unordered_map<std::string, int> folders_;  // folders watched, with their descriptors
};

}  // namespace

bool stamps_unchanged_watched(const std::vector<FileStamp>& stamps, WatchState& state) {
  Watch& watch = Watch::instance();
  std::lock_guard<std::mutex> lock(watch.mu);
  if (state.mode == WatchState::kUnwatchable) return stamps_unchanged(stamps);
  if (state.mode == WatchState::kWatched && state.generation == watch.generation) {
    uint64_t now = watch.drain();
    if (state.generation == watch.generation) {
      if (now == state.epoch) return true;
      // Something happened: the stats decide, and a quiet watch from here on
      // means nothing changed since this check.
      bool same = stamps_unchanged(stamps);
      state.epoch = same ? now : now - 1;  // now - 1: an epoch already past, so the next check stats again
      return same;
    }
    // A watch was removed (a file deleted, a filesystem unmounted): add them again.
  }
  // First check (or the first in a forked child, or after a watch was
  // removed): watch, then stat, so an edit in between is both seen by the
  // stat and queued as an event.
  if (!watch.add(stamps)) {
    state.mode = WatchState::kUnwatchable;
    return stamps_unchanged(stamps);
  }
  uint64_t now = watch.drain();  // may remove watches of files gone before: read the generation after it
  state.mode = WatchState::kWatched;
  state.generation = watch.generation;
  bool same = stamps_unchanged(stamps);
  state.epoch = same ? now : now - 1;
  return same;
}

}  // namespace kreg
