#include "discovery.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "manifest.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;

// Adds the kernels directly under `root` that no earlier root already named.
// Errors (missing root, unreadable folder) only mean "nothing here": discovery
// lists what exists, and parsing a manifest is where problems get reported.
void scan_root(const std::string& root, std::map<std::string, std::string>* found) {
  std::error_code ec;
  const fs::path base = fs::absolute(root, ec).lexically_normal();
  if (ec || !fs::is_directory(base, ec)) return;
  fs::directory_iterator it(base, ec);
  if (ec) return;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return;
    const std::string name = it->path().filename().string();
    if (!is_valid_kernel_name(name) || found->count(name) > 0) continue;
    if (!it->is_directory(ec)) continue;  // follows symlinks: a linked-in kernel counts
    const fs::path manifest = it->path() / kManifestFileName;
    if (!fs::is_regular_file(manifest, ec)) continue;
    found->emplace(name, manifest.string());
  }
}

}  // namespace

std::vector<KernelLocation> discover_kernels(const std::vector<std::string>& roots) {
  std::map<std::string, std::string> found;  // ordered, so the result is sorted by name
  for (const std::string& root : roots) scan_root(root, &found);
  std::vector<KernelLocation> out;
  out.reserve(found.size());
  for (const auto& [name, manifest] : found) out.push_back(KernelLocation{name, manifest});
  return out;
}

std::optional<KernelLocation> locate_kernel(const std::string& name, const std::vector<std::string>& roots) {
  if (!is_valid_kernel_name(name)) return std::nullopt;
  for (const std::string& root : roots) {
    std::error_code ec;
    const fs::path base = fs::absolute(root, ec).lexically_normal();
    if (ec || !fs::is_directory(base, ec)) continue;
    const fs::path dir = base / name;
    if (!fs::is_directory(dir, ec)) continue;  // follows symlinks, as scan_root does
    const fs::path manifest = dir / kManifestFileName;
    if (fs::is_regular_file(manifest, ec)) return KernelLocation{name, manifest.string()};
  }
  return std::nullopt;
}

}  // namespace kreg
