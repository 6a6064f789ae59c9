#include "dep_record.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "cache_fs.h"
#include "cache_store.h"
#include "toml_util.h"
#include "atomic_file.h"
#include "file_read.h"

namespace kreg {

namespace fs = std::filesystem;

namespace {

// Symlinks resolved where the path exists; lexically normalized otherwise.
std::string real_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(path), ec);
  if (ec) return fs::path(path).lexically_normal().string();
  return p.string();
}

// `path` relative to `dir` when it lies inside it (both already resolved).
std::optional<std::string> inside(const std::string& path, const std::string& dir) {
  if (dir.empty() || path.size() <= dir.size() + 1) return std::nullopt;
  if (path.compare(0, dir.size(), dir) != 0 || path[dir.size()] != '/') return std::nullopt;
  return path.substr(dir.size() + 1);
}

bool is_safe_relative(const std::string& label) {
  if (label.empty() || label.front() == '/') return false;
  std::istringstream parts(label);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

Key key_from(const Key& base, const std::vector<DepFile>& files, const std::string& unverified) {
  KeyBuilder builder;
  for (const KeyInput& input : base.inputs) builder.add(input.name, input.value);
  for (const DepFile& file : files) builder.add_file_digest(file.label, file.content);
  if (!unverified.empty()) builder.add("deps.unverified", unverified);
  return builder.finish();
}

DepEntry entry_from_table(const toml::table& t) {
  DepEntry entry;
  entry.key = get_string(t, "key");
  if (!Digest::from_hex(entry.key)) throw std::runtime_error("field 'key' is not a digest");
  for (const KeyInput& file : get_inputs(t, "files")) {
    std::optional<Digest> digest = Digest::from_hex(file.value);
    if (!digest) throw std::runtime_error("file " + file.name + " has no digest");
    entry.files.push_back(DepFile{file.name, *digest});
  }
  return entry;
}

}  // namespace

std::string dep_record_to_toml(const DepRecord& record) {
  std::ostringstream out;
  out << "format = " << kDepRecordFormat << "\n";
  out << "base = " << toml_quote(record.base) << "\n";
  for (const DepEntry& entry : record.entries) {
    out << "\n[[entry]]\n";
    out << "key = " << toml_quote(entry.key) << "\n";
    out << "files = {";
    bool first = true;
    for (const DepFile& file : entry.files) {
      out << (first ? " " : ", ") << toml_quote(file.label) << " = " << toml_quote(file.content.hex());
      first = false;
    }
    out << (first ? "}\n" : " }\n");
  }
  return out.str();
}

DepRecord dep_record_from_toml(const std::string& text) {
  toml::table t;
  parse_toml_table(text, "dependency record", &t);
  if (get_int(t, "format") != kDepRecordFormat) {
    throw std::runtime_error("dependency record of another format");
  }
  DepRecord record;
  record.base = get_string(t, "base");
  if (const toml::node* entries = t.get("entry")) {
    const toml::array* array = entries->as_array();
    if (array == nullptr) throw std::runtime_error("field 'entry' must be an array of tables");
    for (const toml::node& item : *array) {
      const toml::table* table = item.as_table();
      if (table == nullptr) throw std::runtime_error("field 'entry' must be an array of tables");
      record.entries.push_back(entry_from_table(*table));
    }
  }
  return record;
}

std::optional<DepRecord> read_dep_record(const std::string& path) {
  // Any problem means "nothing recorded": the caller builds and writes a
  // fresh record, which is always correct, just slower.
  try {
    std::optional<std::string> text = read_file(path);
    if (!text) return std::nullopt;
    return dep_record_from_toml(*text);
  } catch (...) {
    return std::nullopt;
  }
}

DepLabels::DepLabels(std::vector<LabelRoot> roots) : roots_(std::move(roots)) {
  for (const LabelRoot& root : roots_) real_.push_back(real_path(root.dir));
}

std::optional<std::string> DepLabels::label(const std::string& path) const {
  const std::string real = real_path(path);
  for (size_t i = 0; i < roots_.size(); ++i) {
    if (std::optional<std::string> rel = inside(real, real_[i])) return roots_[i].prefix + *rel;
  }
  return std::nullopt;
}

std::optional<std::string> DepLabels::path(const std::string& label) const {
  if (!is_safe_relative(label)) return std::nullopt;
  // The longest prefix that fits wins; the root with the empty prefix takes the rest.
  const LabelRoot* best = nullptr;
  for (const LabelRoot& root : roots_) {
    if (label.compare(0, root.prefix.size(), root.prefix) != 0) continue;
    if (best == nullptr || root.prefix.size() > best->prefix.size()) best = &root;
  }
  if (best == nullptr || label.size() == best->prefix.size()) return std::nullopt;
  return best->dir + "/" + label.substr(best->prefix.size());
}

Key key_with_files(const Key& base, const std::vector<DepFile>& files) {
  return key_from(base, files, "");
}

std::optional<DepMatch> match_dep_record(const std::string& path, const Key& base,
                                         const DepLabels& labels) {
  std::optional<DepRecord> record = read_dep_record(path);
  if (!record || record->base != base.digest.hex()) return std::nullopt;
  for (const DepEntry& entry : record->entries) {
    DepMatch match;
    bool matches = true;
    for (const DepFile& file : entry.files) {
      std::optional<std::string> file_path = labels.path(file.label);
      std::optional<FileStamp> stamp = file_path ? stamp_file(*file_path) : std::nullopt;
      if (!stamp || stamp->content != file.content) {
        matches = false;
        break;
      }
      match.stamps.push_back(std::move(*stamp));
    }
    if (!matches) continue;
    match.key = key_with_files(base, entry.files);
    // An entry whose key another derivation wrote is not trusted.
    if (match.key.digest.hex() == entry.key) return match;
  }
  return std::nullopt;
}

BuildDeps deps_from_build(const Key& base, const DepLabels& labels,
                          const std::vector<std::string>& reported,
                          const std::vector<std::string>& scanned, int64_t build_started_ns) {
  std::set<std::string> seen;
  for (const std::string& path : scanned) seen.insert(real_path(path));
  BuildDeps out;
  std::vector<DepFile> files;
  bool verified = true;
  for (const std::string& path : reported) {
    const std::string real = real_path(path);
    if (!seen.insert(real).second) continue;
    std::optional<std::string> label = labels.label(real);
    if (!label) continue;  // outside the kernel's folders: covered by the toolchain inputs
    std::optional<FileStamp> stamp = stamp_file(real);
    if (!stamp || stamp->stat.mtime_ns >= build_started_ns) {
      // Saved during the build (or gone): its bytes now may not be what the
      // compiler read. A size no file has makes every later check re-hash it.
      verified = false;
      if (!stamp) stamp = FileStamp{real, FileStat{}, Digest{}};
      stamp->stat.size = -1;
    }
    files.push_back(DepFile{*label, stamp->content});
    out.stamps.push_back(std::move(*stamp));
  }
  std::sort(files.begin(), files.end(),
            [](const DepFile& a, const DepFile& b) { return a.label < b.label; });
  if (!verified) {
    out.key = key_from(base, files, cache_fs::random_hex(32));
    return out;
  }
  out.key = key_with_files(base, files);
  out.entry = DepEntry{out.key.digest.hex(), files};
  return out;
}

void add_dep_entry(const std::string& path, const Key& base, const DepEntry& entry) {
  DepRecord record;
  std::optional<DepRecord> old = read_dep_record(path);
  if (old && old->base == base.digest.hex()) record = std::move(*old);
  record.base = base.digest.hex();
  record.entries.erase(std::remove_if(record.entries.begin(), record.entries.end(),
                                      [&](const DepEntry& e) { return e.key == entry.key; }),
                       record.entries.end());
  record.entries.insert(record.entries.begin(), entry);
  if (record.entries.size() > kDepRecordMaxEntries) record.entries.resize(kDepRecordMaxEntries);
  // Unsynced (cache_store.h): a record cut short by a crash loses entries or
  // fails to parse, and an entry cut short no longer derives its own key, so
  // match_dep_record rejects it.
  write_file_atomic(path, dep_record_to_toml(record), Sync::kUnsynced);
}

}  // namespace kreg
