// Kernel discovery: which names exist (closest_name.h suggests one for a typo).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kreg {

struct KernelLocation {
  std::string name;
  std::string manifest;  // absolute path of kernel.toml
};

// Each root is a folder whose sub-folders hold kernel.toml files. A name found
// in an earlier root shadows later ones. Sorted by name.
std::vector<KernelLocation> discover_kernels(const std::vector<std::string>& roots);

// The kernel `name` as discover_kernels would list it, found without listing
// every root: a fresh `get` asks for one name. nullopt when it has none.
std::optional<KernelLocation> locate_kernel(const std::string& name, const std::vector<std::string>& roots);

}  // namespace kreg
