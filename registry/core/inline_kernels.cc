#include "inline_kernels.h"

#include <map>
#include <mutex>

namespace kreg {
namespace {

struct Held {
  std::mutex mutex;  // a get on another thread may look a name up while a cell defines one
  std::map<std::string, Manifest> by_name;
};

Held& held() {
  static Held* table = new Held;  // never destroyed: no exit-order hazard for a late lookup
  return *table;
}

}  // namespace

bool define_inline_kernel(const Manifest& m) {
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto [it, added] = h.by_name.try_emplace(m.name, m);
  if (added) return true;
  const bool changed = it->second.inline_text != m.inline_text || it->second.dir != m.dir;
  it->second = m;
  return changed;
}

std::optional<Manifest> find_inline_kernel(const std::string& name) {
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.by_name.find(name);
  if (it == h.by_name.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> inline_kernel_names() {
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mutex);
  std::vector<std::string> names;
  for (const auto& [name, manifest] : h.by_name) names.push_back(name);
  return names;
}

}  // namespace kreg
