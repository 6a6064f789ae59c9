#include "include_scan.h"
#include "file_read.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <optional>
#include <set>
#include <unordered_map>

namespace kreg {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; }

// Parses one line (without its newline). Returns the directive when the line
// is `#include "name"` or `#include <name>` with any blanks around `#`.
std::optional<IncludeDirective> parse_include_line(const std::string& text, size_t begin,
                                                   size_t end, int line) {
  size_t i = begin;
  while (i < end && is_blank(text[i])) ++i;
  if (i >= end || text[i] != '#') return std::nullopt;
  ++i;
  while (i < end && is_blank(text[i])) ++i;
  static const char kKeyword[] = "include";
  const size_t keyword_len = sizeof kKeyword - 1;
  if (end - i < keyword_len || text.compare(i, keyword_len, kKeyword) != 0) return std::nullopt;
  i += keyword_len;
  while (i < end && is_blank(text[i])) ++i;
  if (i >= end) return std::nullopt;
  // Anything but a quote or '<' here ("include_next", a macro name) is not a
  // form this scan can resolve; the depfile covers those.
  char close;
  if (text[i] == '"') {
    close = '"';
  } else if (text[i] == '<') {
    close = '>';
  } else {
    return std::nullopt;
  }
  const size_t name_begin = i + 1;
  size_t name_end = name_begin;
  while (name_end < end && text[name_end] != close) ++name_end;
  if (name_end >= end || name_end == name_begin) return std::nullopt;  // unterminated or empty
  IncludeDirective directive;
  directive.name = text.substr(name_begin, name_end - name_begin);
  directive.angled = close == '>';
  directive.line = line;
  return directive;
}

// Lexical normalization: collapses "//", "." and "dir/.." without touching
// the file system. Used only for paths that do not exist.
std::string normalize_lexically(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string part = path.substr(i, j - i);
    if (part.empty() || part == ".") {
      // skip
    } else if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (path.empty() || path[0] != '/') {
        parts.push_back(part);  // a relative path may climb; "/.." is "/"
      }
    } else {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = !path.empty() && path[0] == '/' ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out += '/';
    out += parts[k];
  }
  return out.empty() ? "." : out;
}

// realpath() when the path exists (so symlinked duplicates collapse),
// lexical normalization otherwise.
std::string normalize_path(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
  return normalize_lexically(path);
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string join(const std::string& dir, const std::string& name) {
  if (!name.empty() && name[0] == '/') return name;
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// A file to scan. Quoted includes resolve against the folder the file was
// reached through (as the compiler does), so the folder is kept along with
// the canonical path; both are realpath()ed, which also bounds the walk when
// symlinked folders loop.
struct Visit {
  std::string file;    // canonical path of the file
  std::string folder;  // canonical folder it was reached through
};

class ClosureScanner {
 public:
  explicit ClosureScanner(const std::vector<std::string>& include_dirs)
      : include_dirs_(include_dirs) {}

  void add_source(const std::string& source) {
    if (!is_regular_file(source)) {
      result_.unresolved.push_back(source + ": cannot read this source file");
      return;
    }
    enqueue(source);
  }

  IncludeClosure finish() {
    while (!queue_.empty()) {
      Visit visit = std::move(queue_.front());
      queue_.pop_front();
      scan(visit);
    }
    result_.files.assign(files_.begin(), files_.end());
    return std::move(result_);
  }

 private:
  void enqueue(const std::string& path) {
    Visit visit{canonical(path), canonical(parent_dir(path))};
    files_.insert(visit.file);
    if (seen_.insert(visit.folder + '\0' + visit.file).second) queue_.push_back(std::move(visit));
  }

  void scan(const Visit& visit) {
    const std::optional<std::string> text = read_file(visit.file);
    if (!text) {
      report(visit.file + ": cannot read");
      return;
    }
    for (const IncludeDirective& directive : find_include_directives(*text)) {
      const std::optional<std::string> found = resolve(directive, visit.folder);
      if (found) {
        enqueue(*found);
      } else if (!directive.angled) {
        report(visit.file + ":" + std::to_string(directive.line) + ": " + directive.name);
      }
      // An unresolved <name> is a system or toolkit header: left out on purpose.
    }
  }

  // A file reached through two folders is scanned twice; say each thing once.
  void report(std::string line) {
    if (reported_.insert(line).second) result_.unresolved.push_back(std::move(line));
  }

  std::optional<std::string> resolve(const IncludeDirective& directive,
                                     const std::string& includer_folder) {
    if (!directive.angled) {
      const std::string candidate = join(includer_folder, directive.name);
      if (regular_file(candidate)) return candidate;
    }
    for (const std::string& dir : include_dirs_) {
      const std::string candidate = join(dir, directive.name);
      if (regular_file(candidate)) return candidate;
    }
    return std::nullopt;
  }

  // The file system's answers, asked once per path in a scan: a header
  // library's files include each other thousands of times (CUTLASS: ~370
  // files), and realpath() readlink()s every component from the root; asked
  // anew each time they were three quarters of a scan (readlink 59 %, stat
  // 13 %, measured by perf). Within one scan the answers cannot go stale in
  // a way the scan could tell: it never promised a snapshot of a tree being
  // edited while it walks, and each scan starts with empty memos.
  const std::string& canonical(const std::string& path) {
    auto found = canonical_.find(path);
    if (found == canonical_.end()) found = canonical_.emplace(path, normalize_path(path)).first;
    return found->second;
  }

  bool regular_file(const std::string& path) {
    auto found = regular_file_.find(path);
    if (found == regular_file_.end()) found = regular_file_.emplace(path, is_regular_file(path)).first;
    return found->second;
  }

  const std::vector<std::string>& include_dirs_;
  std::deque<Visit> queue_;
  std::set<std::string> seen_;   // folder NUL file, for each visit queued
  std::set<std::string> files_;  // canonical paths, sorted
  std::set<std::string> reported_;
  std::unordered_map<std::string, std::string> canonical_;  // path as joined -> normalize_path()
  std::unordered_map<std::string, bool> regular_file_;      // path as joined -> is_regular_file()
  IncludeClosure result_;
};

}  // namespace

std::vector<IncludeDirective> find_include_directives(const std::string& text) {
  std::vector<IncludeDirective> out;
  size_t begin = 0;
  int line = 1;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    const size_t next = end == std::string::npos ? text.size() + 1 : end + 1;
    if (end == std::string::npos) end = text.size();
    if (end > begin && text[end - 1] == '\r') --end;  // CRLF
    if (auto directive = parse_include_line(text, begin, end, line)) {
      out.push_back(std::move(*directive));
    }
    begin = next;
    ++line;
  }
  return out;
}

IncludeClosure scan_include_closure(const std::vector<std::string>& sources,
                                    const std::vector<std::string>& include_dirs) {
  ClosureScanner scanner(include_dirs);
  for (const std::string& source : sources) scanner.add_source(source);
  return scanner.finish();
}

}  // namespace kreg
