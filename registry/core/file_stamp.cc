#include "file_stamp.h"

#include <sys/stat.h>
#include <time.h>

namespace kreg {

namespace {

FileStat file_stat_of(const struct stat& st) {
  FileStat out;
  out.size = static_cast<int64_t>(st.st_size);
  // Nanoseconds: two saves within one second must still look different.
  out.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  out.inode = static_cast<uint64_t>(st.st_ino);
  return out;
}

}  // namespace

// stat(), not statx() with a smaller mask: it asks for mtime, and on kernels
// with multigrain timestamps that query is what gives the next write a
// distinct, fine-grained mtime, so a same-size edit within one clock tick of
// the stamp still shows (file_stamp_test: SameSizeEditRightAfterTheStamp).
std::optional<FileStat> stat_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return file_stat_of(st);
}

int64_t wall_clock_ns() {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

bool stamp_is_racy(const FileStamp& stamp) {
  const int64_t mtime = stamp.stat.mtime_ns;
  const int64_t tick = mtime % 1000000000 == 0 ? kCoarseTimestampTickNs : kFineTimestampTickNs;
  return stamp.recorded_ns < mtime + tick;
}

std::optional<FileStamp> stamp_file(const std::string& path) {
  // The recording time before the stat, the stat before hashing: if the file
  // changes in between, the recorded stat is the older one (or the stamp is
  // racy), so the next check re-hashes instead of trusting stale bytes.
  const int64_t recorded = wall_clock_ns();
  std::optional<FileStat> stat = stat_file(path);
  if (!stat) return std::nullopt;
  std::optional<Digest> content = hash_file(path);
  if (!content) return std::nullopt;
  return FileStamp{path, *stat, *content, recorded};
}

StampCheck check_stamps(std::vector<FileStamp>& stamps) {
  StampCheck check;
  for (FileStamp& stamp : stamps) {
    const int64_t recorded = wall_clock_ns();
    std::optional<FileStat> now = stat_file(stamp.path);
    if (!now) {
      check.changed.push_back(stamp.path);  // deleted or unreadable
      continue;
    }
    if (*now == stamp.stat && !stamp_is_racy(stamp)) continue;
    std::optional<Digest> content = hash_file(stamp.path);
    if (!content || *content != stamp.content) {
      check.changed.push_back(stamp.path);
      continue;
    }
    // Touched or rewritten with the same bytes: remember the new stat so the
    // next check is stat-only again.
    stamp.stat = *now;
    stamp.recorded_ns = recorded;  // a tick after the mtime, this stamp is no longer racy
    check.refreshed = true;
  }
  return check;
}

bool stamps_unchanged(const std::vector<FileStamp>& stamps) {
  // The hot path of every in-process `get`: one stat() per file and nothing
  // else, since those syscalls are nearly all of its cost.
  struct stat st;
  for (const FileStamp& stamp : stamps) {
    if (stamp_is_racy(stamp)) return false;  // the stat cannot vouch: check_stamps re-hashes
    if (::stat(stamp.path.c_str(), &st) != 0 || !(file_stat_of(st) == stamp.stat)) return false;
  }
  return true;
}

}  // namespace kreg
