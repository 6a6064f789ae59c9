#include "memo.h"

#include <sstream>

#include "cache_store.h"
#include "toml_util.h"
#include "atomic_file.h"
#include "file_read.h"

namespace kreg {

namespace {

void write_inputs(std::ostringstream& out, const std::vector<KeyInput>& inputs) {
  out << "\n[inputs]\n";
  for (const KeyInput& input : inputs) {
    out << toml_quote(input.name) << " = " << toml_quote(input.value) << "\n";
  }
}

FileStamp read_stamp(const toml::table& t) {
  FileStamp stamp;
  stamp.path = get_string(t, "path");
  stamp.stat.size = get_int(t, "size");
  stamp.stat.mtime_ns = get_int(t, "mtime_ns");
  // TOML integers are signed 64-bit; the inode was written as that bit pattern.
  stamp.stat.inode = static_cast<uint64_t>(get_int(t, "inode"));
  std::optional<Digest> digest = Digest::from_hex(get_string(t, "xxh3"));
  if (!digest) throw std::runtime_error("field 'xxh3' is not a digest");
  stamp.content = *digest;
  return stamp;
}

Memo memo_from_table(const toml::table& t) {
  if (get_int(t, "format") != kMemoFormat) throw std::runtime_error("another memo format");
  Memo memo;
  memo.kernel = get_string(t, "kernel");
  memo.backend = get_string(t, "backend");
  memo.env = get_string(t, "env");
  if (const toml::node* keys = t.get("keys")) {
    const toml::table* table = keys->as_table();
    if (table == nullptr) throw std::runtime_error("field 'keys' must be a table");
    for (const auto& [name, value] : *table) {
      if (!value.is_string()) throw std::runtime_error("field 'keys' must hold strings");
      memo.keys[std::string(name.str())] = value.as_string()->get();
    }
  }
  if (const toml::node* stamps = t.get("stamp")) {
    const toml::array* array = stamps->as_array();
    if (array == nullptr) throw std::runtime_error("field 'stamp' must be an array of tables");
    for (const toml::node& item : *array) {
      const toml::table* table = item.as_table();
      if (table == nullptr) throw std::runtime_error("field 'stamp' must be an array of tables");
      memo.stamps.push_back(read_stamp(*table));
    }
  }
  memo.inputs = get_inputs(t, "inputs");
  // A file cut short at a table boundary still parses; its counts tell.
  if (get_int(t, "stamp_count") != static_cast<int64_t>(memo.stamps.size()) ||
      get_int(t, "input_count") != static_cast<int64_t>(memo.inputs.size())) {
    throw std::runtime_error("the memo is cut short");
  }
  return memo;
}

}  // namespace

std::string memo_to_toml(const Memo& memo) {
  std::ostringstream out;
  out << "format = " << kMemoFormat << "\n";
  out << "kernel = " << toml_quote(memo.kernel) << "\n";
  out << "backend = " << toml_quote(memo.backend) << "\n";
  out << "env = " << toml_quote(memo.env) << "\n";
  out << "keys = {";
  bool first = true;
  for (const auto& [name, value] : memo.keys) {
    out << (first ? " " : ", ") << toml_quote(name) << " = " << toml_quote(value);
    first = false;
  }
  out << (first ? "}\n" : " }\n");
  out << "stamp_count = " << memo.stamps.size() << "\n";
  out << "input_count = " << memo.inputs.size() << "\n";
  for (const FileStamp& stamp : memo.stamps) {
    out << "\n[[stamp]]\n";
    out << "path = " << toml_quote(stamp.path) << "\n";
    out << "size = " << stamp.stat.size << "\n";
    out << "mtime_ns = " << stamp.stat.mtime_ns << "\n";
    out << "inode = " << static_cast<int64_t>(stamp.stat.inode) << "\n";
    out << "xxh3 = " << toml_quote(stamp.content.hex()) << "\n";
  }
  write_inputs(out, memo.inputs);
  return out.str();
}

std::optional<Memo> read_memo(const std::string& path) {
  // Any problem means "no usable memo": the caller re-hashes everything,
  // which is always correct, just slower.
  try {
    std::optional<std::string> text = read_file(path);
    if (!text) return std::nullopt;
    toml::table table;
    parse_toml_table(*text, path, &table);
    return memo_from_table(table);
  } catch (...) {
    return std::nullopt;
  }
}

void write_memo(const std::string& path, const Memo& memo) {
  // Unsynced (cache_store.h): the counts make a memo cut short by a crash
  // unreadable, never one that vouches for a key with fewer stamps.
  write_file_atomic(path, memo_to_toml(memo), Sync::kUnsynced);
}

}  // namespace kreg
