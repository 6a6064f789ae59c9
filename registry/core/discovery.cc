#include "discovery.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "file_read.h"
#include "manifest.h"
#include "toml_util.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;

// A kernel folder of one root: where, and the name it gives ("" when none).
struct Candidate {
  std::string folder;
  std::string manifest;
  std::string name;
  std::string problem;  // why it gives no name
};

// Whether some line starts with `name =`: most manifests set no name, and
// parsing each one would make a fresh get's lookup ~10x slower (9 kernels:
// 70 us -> 620 us).
bool may_set_name(const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    size_t i = at;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (text.compare(i, 4, "name") == 0) {
      i += 4;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < text.size() && text[i] == '=') return true;
    }
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return false;
}

// The name a manifest sets, or the folder's derived one. Only the `name` key
// is read: a manifest that does not parse still gets its derived name, so the
// kernel is listed and get() reports the manifest's error with its field.
Candidate name_of(const fs::path& dir, const fs::path& manifest) {
  Candidate c{dir.filename().string(), manifest.string(), "", ""};
  toml::table table;
  const std::optional<std::string> text = read_file(c.manifest);
  if (text && may_set_name(*text) && !parse_toml_guarded(*text, c.manifest, &table)) {
    if (const toml::node* n = table.get("name")) {
      const std::optional<std::string> value = n->value<std::string>();
      if (value && is_valid_kernel_name(*value)) {
        c.name = *value;
      } else {
        c.problem = "its kernel.toml sets an invalid name" + (value ? " \"" + *value + "\"" : std::string()) +
                    "; use 1-64 characters from [a-z0-9_], not starting with a digit";
      }
      return c;
    }
  }
  c.name = kernel_name_from_folder(c.folder);
  if (c.name.empty()) {
    c.problem = "its name gives no kernel name (at most 64 characters from [a-z0-9_]); "
                "set name = \"...\" in its kernel.toml, or rename the folder";
  }
  return c;
}

// The kernel folders directly under `root`, in folder order. Errors (missing
// root, unreadable folder) only mean "nothing here".
std::vector<Candidate> scan_root(const std::string& root) {
  std::vector<Candidate> found;
  std::error_code ec;
  const fs::path base = fs::absolute(root, ec).lexically_normal();
  if (ec || !fs::is_directory(base, ec)) return found;
  fs::directory_iterator it(base, ec);
  if (ec) return found;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string folder = it->path().filename().string();
    if (folder.empty() || folder[0] == '.') continue;
    if (!it->is_directory(ec)) continue;  // follows symlinks: a linked-in kernel counts
    const fs::path manifest = it->path() / kManifestFileName;
    if (!fs::is_regular_file(manifest, ec)) continue;
    found.push_back(name_of(it->path(), manifest));
  }
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) { return a.folder < b.folder; });
  return found;
}

std::string parent_of(const std::string& manifest) { return fs::path(manifest).parent_path().string(); }

}  // namespace

Discovery discover(const std::vector<std::string>& roots) {
  std::map<std::string, KernelLocation> kernels;  // ordered, so the result is sorted by name
  std::set<std::string> clashed;  // names two folders of one root give: no later root's folder takes them
  Discovery out;
  for (const std::string& root : roots) {
    std::map<std::string, std::vector<const Candidate*>> by_name;
    const std::vector<Candidate> candidates = scan_root(root);
    for (const Candidate& c : candidates) {
      if (!c.problem.empty()) {
        out.unusable.push_back(UnusableFolder{parent_of(c.manifest), c.name, c.problem});
      } else {
        by_name[c.name].push_back(&c);
      }
    }
    for (const auto& [name, same] : by_name) {
      if (same.size() > 1) {
        // Neither wins: which one get() ran would depend on directory order.
        std::string folders;
        for (const Candidate* c : same) folders += (folders.empty() ? "" : " and ") + parent_of(c->manifest);
        for (const Candidate* c : same) {
          out.unusable.push_back(UnusableFolder{
              parent_of(c->manifest), name,
              "the folders " + folders + " both give the kernel name \"" + name +
                  "\"; rename one folder, or set name = \"...\" in one kernel.toml"});
        }
        if (kernels.count(name) == 0) clashed.insert(name);
        continue;
      }
      if (kernels.count(name) > 0 || clashed.count(name) > 0) continue;  // an earlier root's shadows it
      kernels.emplace(name, KernelLocation{name, same[0]->manifest, same[0]->folder});
    }
  }
  out.kernels.reserve(kernels.size());
  for (auto& [name, location] : kernels) out.kernels.push_back(std::move(location));
  std::sort(out.unusable.begin(), out.unusable.end(),
            [](const UnusableFolder& a, const UnusableFolder& b) { return a.dir < b.dir; });
  return out;
}

std::vector<KernelLocation> discover_kernels(const std::vector<std::string>& roots) { return discover(roots).kernels; }

std::optional<KernelLocation> locate_kernel(const std::string& name, const std::vector<std::string>& roots) {
  // Every folder is read: a `name` key or another folder's derived name may
  // claim `name`. A few small files per root, on the slow path of a get only.
  const Discovery found = discover(roots);
  for (const KernelLocation& k : found.kernels) {
    if (k.name == name) return k;
  }
  for (const KernelLocation& k : found.kernels) {
    if (k.folder == name) return k;
  }
  return std::nullopt;
}

}  // namespace kreg
