#include "file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace kreg {

namespace {

std::string holder_line() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
  return "pid=" + std::to_string(::getpid()) + " host=" + host +
         " since=" + std::to_string(static_cast<long long>(std::time(nullptr))) + "\n";
}

// Records who holds the lock. Informational only, so failures are ignored.
void write_holder(int fd, const std::string& line) {
  if (::ftruncate(fd, 0) != 0) return;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::pwrite(fd, line.data() + done, line.size() - done,
                               static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::optional<FileLock> FileLock::try_acquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    // Not "someone holds it": a caller polling on nullopt would wait forever.
    throw std::runtime_error("cannot open lock file " + path + ": " + std::strerror(errno) +
                             "; check that the cache folder exists and is writable");
  }
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    const int err = errno;
    if (err == EINTR) continue;
    ::close(fd);
    if (err == EWOULDBLOCK) return std::nullopt;
    throw std::runtime_error("cannot lock " + path + ": " + std::strerror(err));
  }
  write_holder(fd, holder_line());
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (fd_ < 0) return;
  // Clear the holder line while still holding the lock, so the file never
  // names a process that no longer holds it (after a clean release).
  if (::ftruncate(fd_, 0) != 0) {
    // ignored: the line is informational
  }
  ::flock(fd_, LOCK_UN);
  ::close(fd_);  // closing would drop the lock anyway; unlocking first is explicit
  fd_ = -1;
}

std::string lock_holder(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[512];
  ssize_t n;
  do {
    n = ::pread(fd, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  const size_t newline = text.find('\n');
  if (newline != std::string::npos) text.resize(newline);
  // The holder line is ASCII ("pid=... host=... since="); a damaged file must
  // still give printable text (it goes into an error message, and through
  // pybind11 into a Python str, which refuses bytes that are not UTF-8).
  for (char& c : text) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return text;
}

}  // namespace kreg
