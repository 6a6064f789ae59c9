// Compiler identities for the key: resolved path + the version line it prints.
//
// Asking nvcc for its version costs tens of milliseconds, too much for the
// no-change path, so answers are memoized in <cache>/v1/toolchains.toml keyed
// by the binary's (path, size, mtime, inode): replacing the compiler re-asks.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kreg {

struct CompilerIdentity {
  std::string path;     // absolute, symlinks resolved
  std::string version;  // first non-empty line of `<path> --version` (nvcc: its last line)
  std::string text() const { return path + " | " + version; }
};

// Runs `<invoked> --version` and returns what it printed (stdout and stderr);
// throws std::runtime_error when it cannot run or exits non-zero.
using VersionAsker = std::function<std::string(const std::string& invoked)>;

// `command` may be a name looked up in PATH or a path. Throws
// std::runtime_error naming the command when it cannot be found or run.
// `ask` defaults to popen(); the Python driver passes its own (subprocess),
// the well-trodden way to start a child from a process that has loaded torch.
CompilerIdentity identify_compiler(const std::string& command, const std::string& memo_file,
                                   const VersionAsker& ask = nullptr);

// PATH lookup like `which`; empty when not found.
std::string find_in_path(const std::string& name);

}  // namespace kreg
