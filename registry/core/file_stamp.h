// Cheap change detection that content decides: ccache's "direct mode" idea.
//
// A stamp is (path, size, mtime_ns, inode, content digest). Checking a stamp
// stats the file; only when the stat differs is the file re-hashed, and only
// when the content differs is it reported as changed. A touch or a save with
// the same bytes therefore costs one hash and changes nothing.
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
};

// Stats and hashes; nullopt when the file cannot be read.
std::optional<FileStamp> stamp_file(const std::string& path);

struct StampCheck {
  std::vector<std::string> changed;  // content differs, or the file is gone
  bool refreshed = false;            // some stat differed but content matched
};

// Checks every stamp; refreshes the stat of stamps whose content matched so
// the next check is stat-only again.
StampCheck check_stamps(std::vector<FileStamp>& stamps);

// Stat-only: true when every file's stat matches. The in-process fast path.
bool stamps_unchanged(const std::vector<FileStamp>& stamps);

}  // namespace kreg
