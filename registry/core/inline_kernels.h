// The kernels of this process's notebook cells (%%kernel): manifests held in
// memory (inline_manifest.h), found by name before any kernel folder. They
// live as long as the process, as the cell's Python objects do: a restarted
// notebook defines them again by running the cells, and no generated file in
// the cache can outlive its cell or shadow a kernel of another notebook.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "manifest.h"

namespace kreg {

// Holds `m` (an inline manifest) under its name, replacing the one held
// before. Returns whether it differs from that one in its text or folder: a
// loaded op of the name must then be resolved again, as no file of it moved.
bool define_inline_kernel(const Manifest& m);

// The manifest held under `name`, or nullopt.
std::optional<Manifest> find_inline_kernel(const std::string& name);

// The names held, sorted.
std::vector<std::string> inline_kernel_names();

}  // namespace kreg
