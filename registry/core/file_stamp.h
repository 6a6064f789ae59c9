// Cheap change detection that content decides: ccache's "direct mode" idea.
//
// A stamp is (path, size, mtime_ns, inode, content digest). Checking a stamp
// stats the file; only when the stat differs is the file re-hashed, and only
// when the content differs is it reported as changed. A touch or a save with
// the same bytes therefore costs one hash and changes nothing.
//
// Racy stamps (git's "racily clean" entries): a filesystem keeps times at
// some granularity (FAT 2 s; ext3, HFS+ and many network filesystems whole
// seconds; ext4 and XFS the kernel's coarse clock, a few ms), so a file
// written, stamped and rewritten with the same size within one tick keeps
// its stat. Each stamp therefore records when it was taken (the wall clock
// just before its stat), and a stamp whose mtime is not older than that by
// a tick is re-hashed however equal the stat is, until a check a tick later
// records it again. Without a way to ask a filesystem its granularity, a
// whole-second mtime is taken as a coarse filesystem (kCoarse...), any
// other as a fine one. The file's mtime comes from the same machine's clock
// (a network filesystem whose server clock is ahead can still defeat it, as
// it can git).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hash.h"

namespace kreg {

struct FileStat {
  int64_t size = -1;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  bool operator==(const FileStat& o) const {
    return size == o.size && mtime_ns == o.mtime_ns && inode == o.inode;
  }
};

// nullopt when the file does not exist or cannot be stat'ed.
std::optional<FileStat> stat_file(const std::string& path);

struct FileStamp {
  std::string path;
  FileStat stat;
  Digest content;
  // Wall-clock ns (CLOCK_REALTIME, the clock file times come from) just
  // before `stat` was taken or last re-verified; 0 when unknown (racy).
  int64_t recorded_ns = 0;
};

// Timestamp ticks assumed for a whole-second mtime and for any other.
inline constexpr int64_t kCoarseTimestampTickNs = 2'000'000'000;
inline constexpr int64_t kFineTimestampTickNs = 100'000'000;

// True when the file may have changed within the tick of its recorded mtime
// after the stamp was taken: its stat cannot vouch for its content.
bool stamp_is_racy(const FileStamp& stamp);

int64_t wall_clock_ns();

// Stats and hashes; nullopt when the file cannot be read.
std::optional<FileStamp> stamp_file(const std::string& path);

struct StampCheck {
  std::vector<std::string> changed;  // content differs, or the file is gone
  bool refreshed = false;            // some stat differed but content matched
};

// Checks every stamp, re-hashing those whose stat differs or that are racy;
// refreshes the stat (and recording time) of stamps whose content matched so
// the next check is stat-only again.
StampCheck check_stamps(std::vector<FileStamp>& stamps);

// Stat-only: true when every file's stat matches and no stamp is racy. The
// in-process fast path; false sends the caller to check_stamps.
bool stamps_unchanged(const std::vector<FileStamp>& stamps);

}  // namespace kreg
