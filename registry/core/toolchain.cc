#include "toolchain.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "cache_store.h"
#include "file_stamp.h"
#include "toml_util.h"
#include "atomic_file.h"
#include "file_read.h"

namespace kreg {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Single quotes for /bin/sh: nothing inside is special except the quote itself.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::vector<std::string> non_empty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t last = line.find_last_not_of(" \t\r");
    if (last == std::string::npos) continue;
    const size_t first = line.find_first_not_of(" \t");
    lines.push_back(line.substr(first, last + 1 - first));
  }
  return lines;
}

// gcc and clang put their identity on the first line. nvcc starts with a
// banner and names its release further down:
//   Cuda compilation tools, release 13.0, V13.0.48
//   Build cuda_13.0.r13.0/compiler.36424714_0
std::string pick_version_line(const std::vector<std::string>& lines, bool is_nvcc) {
  if (lines.empty()) return "";
  if (!is_nvcc) return lines.front();
  for (const std::string& line : lines) {
    if (line.find("release") != std::string::npos) return line;
  }
  return lines.back();
}

std::string ask_version(const std::string& command, const std::string& invoked, bool is_nvcc) {
  // LC_ALL=C: a translated banner must not change the key.
  const std::string shell = "LC_ALL=C " + shell_quote(invoked) + " --version 2>&1";
  FILE* pipe = ::popen(shell.c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("cannot run " + command + " --version: " + std::strerror(errno));
  }
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::vector<std::string> lines = non_empty_lines(output);
    throw std::runtime_error("'" + invoked + " --version' failed" +
                             (lines.empty() ? std::string() : ": " + lines.front()) +
                             "; is " + command + " a working compiler?");
  }
  const std::string version = pick_version_line(non_empty_lines(output), is_nvcc);
  if (version.empty()) {
    throw std::runtime_error("'" + invoked + " --version' printed nothing; is " + command +
                             " a working compiler?");
  }
  return version;
}

// toolchains.toml: one table per invoked path (as found in PATH, before
// symlinks are resolved, since tools like ccache answer by the name they are
// called under), holding the resolved binary's stat and the answer.
//   ["/usr/bin/g++"]
//   path = "/usr/bin/x86_64-linux-gnu-g++-12"
//   size = 1  mtime_ns = 2  inode = 3
//   version = "g++ (Debian 12.2.0-14) 12.2.0"
struct MemoEntry {
  std::string path;
  FileStat stat;
  std::string version;
};

std::map<std::string, MemoEntry> read_toolchain_memo(const std::string& memo_file) {
  std::map<std::string, MemoEntry> out;
  std::optional<std::string> text = read_file(memo_file);
  if (!text) return out;
  try {
    toml::table root;
    parse_toml_table(*text, memo_file, &root);
    for (const auto& [name, node] : root) {
      const toml::table* t = node.as_table();
      if (t == nullptr) continue;
      MemoEntry entry;
      entry.path = get_string(*t, "path");
      entry.stat.size = get_int(*t, "size");
      entry.stat.mtime_ns = get_int(*t, "mtime_ns");
      entry.stat.inode = static_cast<uint64_t>(get_int(*t, "inode"));
      entry.version = get_string(*t, "version");
      out[std::string(name.str())] = std::move(entry);
    }
  } catch (const std::exception&) {
    out.clear();  // a damaged memo is only a slower start: ask again
  }
  return out;
}

std::string toolchain_memo_to_toml(const std::map<std::string, MemoEntry>& entries) {
  std::ostringstream out;
  for (const auto& [invoked, entry] : entries) {
    out << "[" << toml_quote(invoked) << "]\n";
    out << "path = " << toml_quote(entry.path) << "\n";
    out << "size = " << entry.stat.size << "\n";
    out << "mtime_ns = " << entry.stat.mtime_ns << "\n";
    out << "inode = " << static_cast<int64_t>(entry.stat.inode) << "\n";
    out << "version = " << toml_quote(entry.version) << "\n\n";
  }
  return out.str();
}

}  // namespace

std::string find_in_path(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* env = ::getenv("PATH");
  const std::string path = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(begin, end - begin);
    if (dir.empty()) dir = ".";  // POSIX: an empty PATH entry is the current folder
    const std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return "";
}

CompilerIdentity identify_compiler(const std::string& command, const std::string& memo_file,
                                   const VersionAsker& ask) {
  const std::string invoked =
      command.find('/') != std::string::npos ? command : find_in_path(command);
  if (invoked.empty() || !is_executable_file(invoked)) {
    throw std::runtime_error("compiler '" + command + "' not found" +
                             (command.find('/') != std::string::npos
                                  ? std::string(" (or not executable)")
                                  : std::string(" in PATH")) +
                             "; install it or put its folder on PATH");
  }
  char resolved[PATH_MAX];
  if (::realpath(invoked.c_str(), resolved) == nullptr) {
    throw std::runtime_error("cannot resolve compiler '" + command + "' (" + invoked +
                             "): " + std::strerror(errno));
  }
  std::optional<FileStat> stat = stat_file(resolved);
  if (!stat) throw std::runtime_error("cannot stat compiler '" + command + "' at " + resolved);

  // Memo key: the absolute invoked path, so a relative command and its
  // absolute spelling share one record.
  char invoked_abs[PATH_MAX];
  std::string memo_key = invoked;
  if (invoked[0] != '/' && ::getcwd(invoked_abs, sizeof invoked_abs) != nullptr) {
    memo_key = std::string(invoked_abs) + "/" + invoked;
  }

  std::map<std::string, MemoEntry> memo = read_toolchain_memo(memo_file);
  auto hit = memo.find(memo_key);
  if (hit != memo.end() && hit->second.path == resolved && hit->second.stat == *stat) {
    return CompilerIdentity{resolved, hit->second.version};
  }

  const bool is_nvcc = basename_of(resolved).find("nvcc") != std::string::npos ||
                       basename_of(invoked).find("nvcc") != std::string::npos;
  std::string version;
  if (ask) {
    version = pick_version_line(non_empty_lines(ask(invoked)), is_nvcc);
    if (version.empty()) {
      throw std::runtime_error("'" + invoked + " --version' printed nothing; is " + command +
                               " a working compiler?");
    }
  } else {
    version = ask_version(command, invoked, is_nvcc);
  }
  CompilerIdentity identity{resolved, version};

  // Read-modify-write. Two processes may race here; the last writer wins and
  // the loser's answer is simply asked again next time.
  memo[memo_key] = MemoEntry{identity.path, *stat, identity.version};
  try {
    write_file_atomic(memo_file, toolchain_memo_to_toml(memo));
  } catch (const std::exception&) {
    // The memo only saves time; an unwritable cache must not stop a build.
  }
  return identity;
}

std::vector<std::string> host_cxx_flags() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // CPUID leaf 1: F16C (ECX bit 29) is a VEX encoding, so it also needs AVX
  // (bit 28) with the OS saving the YMM state (OSXSAVE, bit 27, and XCR0's
  // SSE and AVX bits): the same conditions under which Linux lists f16c.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return {};
  const unsigned needed = (1u << 27) | (1u << 28) | (1u << 29);
  if ((ecx & needed) != needed) return {};
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 0x6u) == 0x6u) return {"-mf16c"};
#endif
  return {};
}

}  // namespace kreg
