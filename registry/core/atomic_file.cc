#include "atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "cache_fs.h"

namespace kreg {

using cache_fs::errno_text;

namespace {

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents, Sync sync) {
  // Same folder as the target, so the rename stays within one file system.
  const std::string dir = parent_of(path);
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = dir + "/." + base + ".tmp-XXXXXX";
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("cannot write " + path + ": cannot create a temporary file in " +
                             dir + ": " + errno_text(errno));
  }
  try {
    cache_fs::write_all(fd, contents, path);
    if (sync == Sync::kDurable && ::fsync(fd) != 0) {
      throw std::runtime_error("cannot write " + path + ": fsync failed: " + errno_text(errno));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot write " + path + ": rename failed: " + errno_text(err));
  }
  if (sync == Sync::kDurable) cache_fs::fsync_path(dir);
}

}  // namespace kreg
