#include "cache_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <system_error>

namespace kreg::cache_fs {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// mkdir -p with mode 0700 for every folder it creates (the cache holds code
// that gets loaded into the process: other users must not write there).
void make_dirs(const std::string& path) {
  // Almost always the folder is there already: one stat, not a mkdir and a
  // stat for each component of the path (a cache store makes five folders
  // on each slow `get`).
  if (is_dir(path)) return;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (::mkdir(prefix.c_str(), 0700) == 0) continue;
    const int err = errno;
    if (err == EEXIST && is_dir(prefix)) continue;
    if (err == EEXIST) {
      throw std::runtime_error("cannot create cache folder " + path + ": " + prefix +
                               " exists and is not a folder; move it away or choose another "
                               "cache root");
    }
    throw std::runtime_error("cannot create cache folder " + prefix + ": " + errno_text(err) +
                             "; check its permissions or choose another cache root");
  }
}

std::string random_hex(size_t digits) {
  static const char kHex[] = "0123456789abcdef";
  std::random_device device;  // getrandom(): distinct across processes and forks
  std::string out;
  while (out.size() < digits) {
    uint32_t bits = device();
    for (int k = 0; k < 8 && out.size() < digits; ++k, bits >>= 4) out += kHex[bits & 15];
  }
  return out;
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // does not follow symlinks
}

// Removes a folder so that readers see it either whole or gone: first rename
// it into tmp under a name clean_staging() recognizes, then delete at leisure.
void discard_dir(const std::string& dir, const std::string& tmp_dir) {
  const std::string aside =
      tmp_dir + "/" + std::to_string(::getpid()) + "-rm-" + random_hex(16);
  if (::rename(dir.c_str(), aside.c_str()) == 0) {
    remove_tree(aside);
  } else if (errno != ENOENT) {
    remove_tree(dir);  // cannot move it (odd mounts): delete in place
  }
}

int64_t mtime_seconds(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec);
}

int64_t disk_bytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto size = it->file_size(size_ec);
      if (!size_ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

void write_all(int fd, const std::string& contents, const std::string& path) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write " + path + ": " + errno_text(errno) +
                               "; is the disk full?");
    }
    done += static_cast<size_t>(n);
  }
}

// Best effort: durability matters, but a file system without fsync on folders
// must not make writing fail.
void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace kreg::cache_fs
