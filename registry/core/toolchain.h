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

// Default flags for the C++ units of kernel libraries, from this CPU.
//
// -mf16c where the CPU has F16C (x86-64 since 2012): without it every
// float16 <-> float conversion (kreg::half is _Float16) is a call into
// libgcc's soft-float routines, and float16 kernels run ~60x slower than
// float32 ones. Not -march=native: that would also enable FMA (changing
// float32 results by contraction) and name no CPU a key could record. Part of
// the key (the kernel-lib recipe), so a library built with them is never
// reused where they would not run. Asked of CPUID, as the compiler's own
// feature checks do: reading /proc/cpuinfo cost a fresh process's `get` ~0.2 ms.
std::vector<std::string> host_cxx_flags();

}  // namespace kreg
