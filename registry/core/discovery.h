// Kernel discovery: which names exist (closest_name.h suggests one for a typo).
//
// Any folder holding a kernel.toml is a kernel. Its name is the manifest's
// `name` key, else derived from the folder's name (kernel_name_from_folder in
// manifest.h: "lab-02-axpy" -> "lab_02_axpy"); get() accepts either. A folder
// that cannot be a kernel (no name derivable, an invalid `name`, a name another
// folder of the same root also gives) is listed as unusable with the reason,
// never skipped in silence. Hidden folders (".x") are not looked at.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kreg {

struct KernelLocation {
  std::string name;
  std::string manifest;  // absolute path of kernel.toml
  std::string folder;    // the folder's own name ("lab-02-axpy"); equals name for most kernels
};

struct UnusableFolder {
  std::string dir;     // absolute path of the folder
  std::string name;    // the kernel name it would have had, or "" when none
  std::string reason;  // what is wrong and what to change
};

struct Discovery {
  std::vector<KernelLocation> kernels;  // sorted by name
  std::vector<UnusableFolder> unusable;  // sorted by folder
};

// Each root is a folder whose sub-folders hold kernel.toml files. A name found
// in an earlier root shadows later ones; two folders of one root giving the
// same name are both unusable (the reason names both).
Discovery discover(const std::vector<std::string>& roots);

// discover(roots).kernels.
std::vector<KernelLocation> discover_kernels(const std::vector<std::string>& roots);

// The kernel `name` as discover would list it: by its name, else by its
// folder's own name. nullopt when none has it (the unusable folders say why).
std::optional<KernelLocation> locate_kernel(const std::string& name, const std::vector<std::string>& roots);

}  // namespace kreg
