// "Did any of these files change?" from one read() instead of one stat() per
// file: an inotify watch over the stamped files, their folders and every
// folder above them, drained without blocking on each in-process `get`.
//
// The watch only ever says "nothing happened": while no event has named a
// watched file (or moved or removed a folder on its path) since the stamps
// were last checked, their stat cannot have changed. Anything else (such an
// event, a queue overflow, a fork, a watch that could not be added) falls back
// to stamps_unchanged(), a stat() per file, whose answer is returned. So the
// watch makes the answer cheaper (one ~0.5 us syscall instead of ~1.7 us per
// file on a 2-core VM), never different.
//
// Where inotify would miss a change, stamps are never watched and keep
// stat'ing: a path through a symlink (an edit of the target is not an event
// of the link's folder), a path not absolute and normalized, and a folder on
// a filesystem another machine can write to unseen by this kernel (NFS, SMB,
// FUSE, 9p, ...: only local filesystems are trusted, kLocalFilesystems in
// change_watch.cc). A process holds one inotify instance (of the user's
// max_user_instances, 128 by default); where none is left, sets are stat'ed.
// Writes through a shared writable mmap() raise no inotify event at all; no
// editor or compiler saves a file that way.
//
// Each file is watched itself (an edit through a hard link elsewhere still
// raises IN_MODIFY on its inode) and in its folder (a save that renames a new
// file over the old name); each folder above by the one name on the path
// (`mv kernels old && cp -r new kernels`). Watches are never removed: a
// process watches the few folders of the kernels it loads.
#pragma once

#include <cstdint>
#include <vector>

#include "file_stamp.h"

namespace kreg {

// Per stamp set: whether its files are watched, and the watch's epoch when
// its stamps were last found unchanged.
struct WatchState {
  enum Mode : uint8_t { kUntried, kWatched, kUnwatchable };
  Mode mode = kUntried;
  uint64_t generation = 0;  // of the watch (a new one after a fork)
  uint64_t epoch = 0;
};

// stamps_unchanged(stamps), from the watch while it is quiet. The first call
// adds the watches (before it stats, so no edit falls between the two).
bool stamps_unchanged_watched(const std::vector<FileStamp>& stamps, WatchState& state);

}  // namespace kreg
