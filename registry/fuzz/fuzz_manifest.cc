// libFuzzer target: kreg::parse_manifest_text on arbitrary bytes.
//
// The contract: any input either parses into a manifest that keeps the
// format's promises (checked below; a broken promise traps) or throws
// kreg::ManifestError. Crashes, hangs, leaks and sanitizer reports are bugs.
// Other std::exception types are caught too (so the fuzzer keeps going), but
// they mean an error without file and field; set KREG_FUZZ_STRICT=1 to make
// them abort, so the fuzzer reports and minimizes them.
//
// The manifest's folder is a real one holding the files the seed manifests
// name, plus a symlink that escapes it, so inputs that get past the TOML
// reach the path checks (exists, regular file, inside the folder).
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "manifest.h"

namespace {

namespace fs = std::filesystem;

std::string make_kernel_dir() {
  std::string root = fs::temp_directory_path().string() + "/kreg-fuzz-XXXXXX";
  if (::mkdtemp(root.data()) == nullptr) {
    std::perror("fuzz_manifest: mkdtemp");
    std::abort();
  }
  const fs::path dir = fs::path(root) / "axpy";  // a valid kernel name
  fs::create_directories(dir / "include" / "axpy");
  for (const char* file : {"axpy_cpu.cpp", "axpy.cu", "axpy.h", "axpy_math.h", "reference.py",
                           "axpy_pybind.cpp", "include/axpy/config.h"}) {
    std::ofstream(dir / file) << "// fuzz fixture\n";
  }
  std::error_code ec;
  fs::create_symlink("/etc/hostname", dir / "escape.cpp", ec);
  fs::create_directory_symlink("/etc", dir / "escape_dir", ec);
  // Removed when the fuzzer exits normally (-max_total_time, -runs).
  static const std::string to_remove = root;
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(to_remove, ignored);
  });
  return dir.string();
}

bool escapes(const std::string& path) {
  if (path.empty() || path[0] == '/') return true;
  for (const fs::path& part : fs::path(path)) {
    if (part == "..") return true;
  }
  return false;
}

void check_paths(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    if (escapes(p)) __builtin_trap();
  }
}

// What a manifest that parsed must hold (see manifest.h).
void check_promises(const kreg::Manifest& m) {
  if (!kreg::is_valid_kernel_name(m.name)) __builtin_trap();
  if (!m.cpu.present && !m.cuda.present) __builtin_trap();
  if (m.cpu.present && m.cpu.sources.empty()) __builtin_trap();
  if (m.cuda.present && m.cuda.sources.empty()) __builtin_trap();
  if (m.ops.empty()) __builtin_trap();
  if (m.binding != "generated" && m.binding != "pybind") __builtin_trap();
  check_paths(m.cpu.sources);
  check_paths(m.cuda.sources);
  check_paths(m.include_dirs);
  check_paths(m.headers);
  if (!m.reference.empty()) check_paths({m.reference});
  if (!m.binding_source.empty()) check_paths({m.binding_source});
  for (const kreg::OpSpec& op : m.ops) {
    if (op.dtypes.empty()) __builtin_trap();
    for (const std::string& dtype : op.dtypes) {
      if (kreg::dtype_suffix(dtype).empty()) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = make_kernel_dir();
  static const bool strict = [] {
    const char* value = ::getenv("KREG_FUZZ_STRICT");
    return value != nullptr && std::string(value) == "1";
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_promises(kreg::parse_manifest_text(text, dir + "/kernel.toml", dir));
  } catch (const kreg::ManifestError& e) {
    // The expected way to refuse; it must say which file.
    if (e.file() != dir + "/kernel.toml") __builtin_trap();
  } catch (const std::exception& e) {
    if (strict) {
      std::fprintf(stderr, "fuzz_manifest: %s escaped as a plain std::exception\n", e.what());
      std::abort();
    }
  }
  return 0;
}
