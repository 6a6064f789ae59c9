#include "tuned_table.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "atomic_file.h"
#include "file_read.h"

namespace kreg {

namespace fs = std::filesystem;

namespace {

const char kMagic[] = "kreg-tuned-table";

bool plain_field(const std::string& s) {
  return !s.empty() && s.find_first_of(" \t\r\n") == std::string::npos;
}

}  // namespace

void TunedTable::put(const TunedWin& win) {
  for (TunedWin& w : wins) {
    if (w.op == win.op && w.dtype == win.dtype && w.bucket == win.bucket && w.arch == win.arch) {
      w = win;
      return;
    }
  }
  wins.push_back(win);
}

std::string tuned_table_path(const std::string& tuned_dir, const std::string& kernel, const std::string& backend,
                             const std::string& key_hex) {
  return tuned_dir + "/" + kernel + "." + backend + "." + key_hex.substr(0, 16) + ".table";
}

std::string format_tuned_table(const TunedTable& t) {
  std::ostringstream out;
  out << kMagic << " " << kTunedTableFormat << "\n"
      << "kernel " << t.kernel << "\nbackend " << t.backend << "\nkey " << t.key << "\n";
  out.precision(17);
  for (const TunedWin& w : t.wins) {
    for (const std::string* f : {&w.op, &w.dtype, &w.bucket, &w.arch, &w.config}) {
      if (!plain_field(*f)) throw std::invalid_argument("tuned table: field '" + *f + "' is empty or has a space");
    }
    out << "win " << w.op << " " << w.dtype << " " << w.bucket << " " << w.arch << " " << w.config << " "
        << w.seconds << " " << w.default_seconds << "\n";
  }
  return out.str();
}

std::optional<TunedTable> parse_tuned_table(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != std::string(kMagic) + " " + std::to_string(kTunedTableFormat)) {
    return std::nullopt;
  }
  TunedTable t;
  bool has_kernel = false, has_backend = false, has_key = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "kernel") has_kernel = static_cast<bool>(fields >> t.kernel);
    else if (tag == "backend") has_backend = static_cast<bool>(fields >> t.backend);
    else if (tag == "key") has_key = static_cast<bool>(fields >> t.key);
    else if (tag == "win") {
      TunedWin w;
      if (!(fields >> w.op >> w.dtype >> w.bucket >> w.arch >> w.config >> w.seconds >> w.default_seconds)) {
        return std::nullopt;
      }
      t.put(w);
    } else {
      return std::nullopt;
    }
  }
  if (!has_kernel || !has_backend || !has_key) return std::nullopt;
  return t;
}

std::optional<TunedTable> read_tuned_table(const std::string& path) {
  std::optional<std::string> text = read_file(path);
  if (!text) return std::nullopt;
  return parse_tuned_table(*text);
}

void write_tuned_table(const std::string& path, const TunedTable& table) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  write_file_atomic(path, format_tuned_table(table));
}

std::vector<std::string> other_tuned_keys(const std::string& tuned_dir, const std::string& kernel,
                                          const std::string& backend, const std::string& key_hex) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  const std::string prefix = kernel + "." + backend + ".";
  const std::string mine = fs::path(tuned_table_path(tuned_dir, kernel, backend, key_hex)).filename().string();
  std::error_code ec;
  for (fs::directory_iterator it(tuned_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == mine || name.rfind(prefix, 0) != 0 || it->path().extension() != ".table") continue;
    std::optional<TunedTable> t = read_tuned_table(it->path().string());
    if (!t || t->kernel != kernel || t->backend != backend) continue;
    std::error_code time_ec;
    found.emplace_back(fs::last_write_time(it->path(), time_ec), t->key);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> keys;
  for (auto& [time, key] : found) keys.push_back(std::move(key));
  return keys;
}

std::string shape_bucket(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (int64_t d : shape) {
    int64_t b = d <= 0 ? 0 : 1;
    while (b > 0 && b < d) b <<= 1;
    out += (out.empty() ? "" : "x") + std::to_string(b);
  }
  return out;
}

}  // namespace kreg
