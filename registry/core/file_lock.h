// A build lock that a killed process cannot leave behind.
//
// flock() locks belong to the open file description: the kernel drops them
// when the holder exits for any reason (SIGKILL, OOM), so there is no stale
// lock to detect. The lock file also records its holder ("pid=... host=...
// since=...") so a waiter that gives up can say whom it waited for.
#pragma once

#include <optional>
#include <string>

namespace kreg {

class FileLock {
 public:
  // Non-blocking attempt; nullopt when another process holds it. Callers poll
  // (so a notebook's interrupt stays responsive) and time out themselves.
  static std::optional<FileLock> try_acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  void release();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// What the lock file says about its holder; empty when unknown.
std::string lock_holder(const std::string& path);

}  // namespace kreg
