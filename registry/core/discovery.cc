#include "discovery.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "manifest.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;

// Classic two-row Levenshtein distance (insert, delete, substitute cost 1).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

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

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) {  // strict: ties go to the earlier candidate
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace kreg
