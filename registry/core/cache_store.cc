#include "cache_store.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "cache_fs.h"
#include "toml_util.h"
#include "file_read.h"

namespace kreg {

namespace fs = std::filesystem;
using cache_fs::discard_dir;
using cache_fs::disk_bytes;
using cache_fs::errno_text;
using cache_fs::fsync_path;
using cache_fs::is_dir;
using cache_fs::make_dirs;
using cache_fs::mtime_seconds;
using cache_fs::random_hex;
using cache_fs::remove_tree;
using cache_fs::write_all;

namespace {

// Rejects names that would escape their folder ("..", "a/b") or be empty.
void check_component(const std::string& name, const char* what) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw std::invalid_argument(std::string("invalid ") + what + " '" + name +
                                "': expected a plain file name such as a hex digest");
  }
}

void write_new_file(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + errno_text(errno));
  try {
    write_all(fd, contents, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

bool valid_artifact_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// Why the published folder `dir` cannot be trusted, or "" when it can; on
// success `*entry` is its record.
std::string verify_object(const std::string& key_hex, const std::string& dir, Entry* entry) {
  std::optional<std::string> text = read_file(dir + "/entry.toml");
  if (!text) return "entry.toml is missing or unreadable";
  try {
    *entry = entry_from_toml(*text);
  } catch (const std::exception& e) {
    return std::string("entry.toml is unusable (") + e.what() + ")";
  }
  if (entry->key != key_hex) {
    return "entry.toml belongs to key " + entry->key + ", not to its folder " + key_hex;
  }
  if (!valid_artifact_name(entry->artifact)) {
    return "entry.toml names an invalid artifact '" + entry->artifact + "'";
  }
  const std::string artifact = dir + "/" + entry->artifact;
  struct stat st;
  if (::stat(artifact.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return "artifact " + entry->artifact + " is missing";
  }
  if (static_cast<int64_t>(st.st_size) != entry->artifact_size) {
    return "artifact " + entry->artifact + " is " + std::to_string(st.st_size) +
           " bytes, entry says " + std::to_string(entry->artifact_size) +
           ": truncated or altered";
  }
  std::optional<Digest> digest = hash_file(artifact);
  if (!digest) return "artifact " + entry->artifact + " cannot be read";
  if (digest->hex() != entry->artifact_xxh3) {
    return "artifact " + entry->artifact + " does not match the XXH3 digest in entry.toml: altered";
  }
  return "";
}

}  // namespace

// ---- entry.toml -------------------------------------------------------------

std::string entry_to_toml(const Entry& entry) {
  std::ostringstream out;
  out << "format = " << entry.format << "\n";
  out << "key = " << toml_quote(entry.key) << "\n";
  out << "kernel = " << toml_quote(entry.kernel) << "\n";
  out << "backend = " << toml_quote(entry.backend) << "\n";
  out << "kind = " << toml_quote(entry.kind) << "\n";
  out << "artifact = " << toml_quote(entry.artifact) << "\n";
  out << "artifact_size = " << entry.artifact_size << "\n";
  out << "artifact_xxh3 = " << toml_quote(entry.artifact_xxh3) << "\n";
  out << "built_at = " << entry.built_at << "\n";
  out << "build_seconds = " << toml_double(entry.build_seconds) << "\n";
  if (entry.deps.empty()) {
    out << "deps = []\n";
  } else {
    out << "deps = [\n";
    for (const std::string& dep : entry.deps) out << "  " << toml_quote(dep) << ",\n";
    out << "]\n";
  }
  out << "\n[inputs]\n";
  for (const KeyInput& input : entry.inputs) {
    out << toml_quote(input.name) << " = " << toml_quote(input.value) << "\n";
  }
  return out.str();
}

Entry entry_from_toml(const std::string& text) {
  toml::table t;
  parse_toml_table(text, "entry.toml", &t);
  Entry entry;
  // The format decides how the rest reads, so it is checked first.
  entry.format = static_cast<int>(get_int(t, "format"));
  if (entry.format != kEntryFormat) {
    throw std::runtime_error("entry format " + std::to_string(entry.format) +
                             ", this registry reads format " + std::to_string(kEntryFormat));
  }
  entry.key = get_string(t, "key");
  entry.kernel = get_string(t, "kernel");
  entry.backend = get_string(t, "backend");
  entry.kind = get_string(t, "kind");
  entry.artifact = get_string(t, "artifact");
  entry.artifact_size = get_int(t, "artifact_size");
  entry.artifact_xxh3 = get_string(t, "artifact_xxh3");
  entry.built_at = get_int(t, "built_at");
  entry.build_seconds = get_double(t, "build_seconds");
  entry.deps = get_string_array(t, "deps");
  entry.inputs = get_inputs(t, "inputs");
  return entry;
}

// ---- CacheStore -------------------------------------------------------------

CacheStore::CacheStore(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) throw std::invalid_argument("cache root is empty: give a folder path");
  v1_ = root_ + "/" + kCacheLayout;
  for (const char* sub : {"objects", "tmp", "locks", "memo", "deps"}) make_dirs(v1_ + "/" + sub);
}

std::string CacheStore::object_dir(const std::string& key_hex) const {
  check_component(key_hex, "cache key");
  return v1_ + "/objects/" + key_hex;
}

std::string CacheStore::lock_path(const std::string& key_hex) const {
  check_component(key_hex, "cache key");
  return v1_ + "/locks/" + key_hex + ".lock";
}

std::string CacheStore::memo_path(const std::string& name) const {
  check_component(name, "memo name");
  return v1_ + "/memo/" + name + ".toml";
}

std::string CacheStore::generated_path(const std::string& name) const {
  check_component(name, "generated file name");
  return v1_ + "/generated/" + name;
}

const std::vector<std::pair<std::string, std::string>>& cache_layout() {
  static const std::vector<std::pair<std::string, std::string>> layout = [] {
    const std::string v = kCacheLayout;
    return std::vector<std::pair<std::string, std::string>>{
        {"root", v},          {"objects", v + "/objects"},      {"tmp", v + "/tmp"},
        {"locks", v + "/locks"}, {"memo", v + "/memo"},        {"deps", v + "/deps"},
        {"generated", v + "/generated"}, {"toolchains", v + "/toolchains.toml"},
        {"cuda_arch", v + "/cuda_arch.txt"}, {"inline", v + "/inline"},
        {"ccache_bin", v + "/ccache-bin"}};
  }();
  return layout;
}

std::string CacheStore::deps_path(const std::string& base_key_hex) const {
  check_component(base_key_hex, "cache key");
  return v1_ + "/deps/" + base_key_hex + ".toml";
}

std::string CacheStore::make_staging_dir() const {
  const std::string tmp = v1_ + "/tmp";
  for (int attempt = 0; attempt < 100; ++attempt) {
    // <pid>-<random>: the pid lets clean_staging() tell abandoned folders apart.
    const std::string dir = tmp + "/" + std::to_string(::getpid()) + "-" + random_hex(16);
    if (::mkdir(dir.c_str(), 0700) == 0) return dir;
    if (errno == ENOENT) {
      make_dirs(tmp);  // someone deleted the cache while we ran: recreate it
      continue;
    }
    if (errno != EEXIST) {
      throw std::runtime_error("cannot create a staging folder in " + tmp + ": " +
                               errno_text(errno) + "; check the cache folder's permissions");
    }
  }
  throw std::runtime_error("cannot create a staging folder in " + tmp + ": names keep colliding");
}

Entry CacheStore::publish(const std::string& staging_dir, Entry entry) const {
  check_component(entry.key, "cache key");
  if (!valid_artifact_name(entry.artifact)) {
    throw std::invalid_argument("publish: invalid artifact name '" + entry.artifact + "'");
  }
  const std::string artifact = staging_dir + "/" + entry.artifact;
  struct stat st;
  if (::stat(artifact.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw std::runtime_error("publish: the build left no artifact " + artifact +
                             "; see the build log");
  }
  std::optional<Digest> digest = hash_file(artifact);
  if (!digest) throw std::runtime_error("publish: cannot read the artifact " + artifact);
  entry.format = kEntryFormat;
  entry.artifact_size = static_cast<int64_t>(st.st_size);
  entry.artifact_xxh3 = digest->hex();
  if (entry.built_at == 0) entry.built_at = static_cast<int64_t>(std::time(nullptr));

  // No fsync before the rename (see install()): a crash that leaves the files
  // short is caught by the size and digest every lookup checks.
  const std::string entry_path = staging_dir + "/entry.toml";
  {
    const int fd = ::open(entry_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      throw std::runtime_error("publish: cannot write " + entry_path + ": " + errno_text(errno));
    }
    try {
      write_all(fd, entry_to_toml(entry), entry_path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  return install(staging_dir, std::move(entry));
}

Lookup CacheStore::adopt(const std::string& key_hex, const std::string& record,
                         const std::string& artifact) const {
  check_component(key_hex, "cache key");
  Lookup result;
  Entry entry;
  try {
    entry = entry_from_toml(record);
  } catch (const std::exception& e) {
    result.miss_reason = std::string("entry.toml is unusable (") + e.what() + ")";
    return result;
  }
  if (!valid_artifact_name(entry.artifact)) {
    result.miss_reason = "entry.toml names an invalid artifact '" + entry.artifact + "'";
    return result;
  }
  const std::string staging = make_staging_dir();
  try {
    write_new_file(staging + "/entry.toml", record);
    write_new_file(staging + "/" + entry.artifact, artifact);
  } catch (...) {
    remove_tree(staging);
    throw;
  }
  // Verified from what is on disk now, exactly as a later lookup will.
  const std::string problem = verify_object(key_hex, staging, &entry);
  if (!problem.empty()) {
    remove_tree(staging);
    result.miss_reason = problem;
    return result;
  }
  result.entry = install(staging, std::move(entry));
  return result;
}

Entry CacheStore::install(const std::string& staging_dir, Entry entry) const {
  // Not fsynced, neither the files nor the folders: 4 fsyncs cost 5-30 ms of
  // a ~0.15 s edit on an ordinary disk, and buy only that an entry survives a
  // power loss. Safety does not rest on them: the rename still makes the
  // folder appear whole or not at all to other processes, and after a crash
  // a folder whose files were not written back is caught by the lookup,
  // which checks entry.toml's key and the artifact's size and XXH3 on every
  // load (verify_object), removes it, and rebuilds: a lost entry costs a
  // build, never a bad load. (The kernel writes the files back within
  // seconds anyway.)
  const std::string target = object_dir(entry.key);
  const std::string objects = v1_ + "/objects";
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (::rename(staging_dir.c_str(), target.c_str()) == 0) {
      entry.dir = target;
      entry.last_used = entry.built_at;
      return entry;
    }
    const int err = errno;
    if (err == ENOENT && !is_dir(objects)) {
      make_dirs(objects);
      continue;
    }
    if (err != EEXIST && err != ENOTEMPTY) {
      throw std::runtime_error("publish: cannot move " + staging_dir + " to " + target + ": " +
                               errno_text(err));
    }
    // Another process published this key first. Keep theirs if it verifies;
    // if it was corrupt, lookup() removed it and ours takes its place.
    Lookup theirs = lookup(entry.key);
    if (theirs.entry) {
      remove_tree(staging_dir);
      return *theirs.entry;
    }
  }
  throw std::runtime_error("publish: " + target + " keeps appearing and failing verification");
}

Lookup CacheStore::lookup(const std::string& key_hex) const {
  Lookup result;
  const std::string dir = object_dir(key_hex);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      result.miss_reason = "cannot read cache entry " + dir + ": " + errno_text(errno);
    }
    return result;
  }
  Entry entry;
  const std::string problem = verify_object(key_hex, dir, &entry);
  if (!problem.empty()) {
    discard_dir(dir, v1_ + "/tmp");
    result.miss_reason = problem + "; rebuilding";
    return result;
  }
  entry.dir = dir;
  const int64_t used = mtime_seconds(dir + "/used");
  entry.last_used = used != 0 ? used : entry.built_at;
  result.entry = std::move(entry);
  return result;
}

void CacheStore::touch(const std::string& key_hex) const {
  const std::string dir = object_dir(key_hex);
  const std::string used = dir + "/used";
  // Only a hint for LRU eviction: failing to record it is not worth an error,
  // and a missing entry has nothing to mark.
  const int fd = ::open(used.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ::futimens(fd, nullptr);
  ::close(fd);
}

std::vector<Entry> CacheStore::list() const {
  std::vector<Entry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(v1_ + "/objects", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string key = it->path().filename().string();
    const std::string dir = it->path().string();
    std::optional<std::string> text = read_file(dir + "/entry.toml");
    if (!text) continue;
    Entry entry;
    try {
      entry = entry_from_toml(*text);
    } catch (const std::exception&) {
      continue;  // broken: lookup() will report and remove it when it matters
    }
    if (entry.key != key) continue;
    entry.dir = dir;
    entry.disk_bytes = disk_bytes(dir);
    const int64_t used = mtime_seconds(dir + "/used");
    entry.last_used = used != 0 ? used : entry.built_at;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.key < b.key; });
  return entries;
}

void CacheStore::remove(const std::string& key_hex) const {
  discard_dir(object_dir(key_hex), v1_ + "/tmp");
}

int CacheStore::clean_staging() const {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(v1_ + "/tmp", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t dash = name.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 9) continue;
    if (name.find_first_not_of("0123456789") != dash) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name.substr(0, dash)));
    if (pid <= 0 || pid == ::getpid()) continue;
    // ESRCH: no such process. EPERM means alive but someone else's: keep it.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    remove_tree(it->path().string());
    ++removed;
  }
  return removed;
}

}  // namespace kreg
