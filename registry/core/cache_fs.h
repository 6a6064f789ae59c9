// File-system steps the cache store, its eviction and atomic_file share.
// Internal to the core: callers outside them use CacheStore or atomic_file.h.
#pragma once

#include <cstdint>
#include <string>

namespace kreg::cache_fs {

std::string errno_text(int err);
bool is_dir(const std::string& path);
// mkdir -p, mode 0700 for every folder it creates; throws naming the folder.
void make_dirs(const std::string& path);
std::string random_hex(size_t digits);
void remove_tree(const std::string& path);
// Renames `dir` into `tmp_dir` first, so readers see it whole or gone.
void discard_dir(const std::string& dir, const std::string& tmp_dir);
int64_t mtime_seconds(const std::string& path);  // 0 when it cannot be stat'ed
int64_t disk_bytes(const std::string& dir);
// Writes all of `contents` to `fd`; throws naming `path` (is the disk full?).
void write_all(int fd, const std::string& contents, const std::string& path);
// fsync of a file or folder, best effort (see cache_fs.cc).
void fsync_path(const std::string& path);

}  // namespace kreg::cache_fs
