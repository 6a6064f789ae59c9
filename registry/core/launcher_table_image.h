// A launcher table as data another process rebuilds: what an AOT wheel
// carries (registry/tools/aot_wheel.py) so that its package fills no table
// through the registry's core, which it does not ship.
//
// The image is the table's bytes with every pointer field zeroed, and, for
// each pointer field that was set, its byte offset and what it pointed to:
//   "symbol"  an exported symbol of a loaded library (a launcher, the op's
//             entry): found again there by name (dlsym)
//   "string"  a NUL-terminated text (op_name, dtypes, arg_names): copied
// The layout is kreg/launcher_table.h's on this machine's ABI, and the magic
// in the bytes says which layout: an image is read only by a binding built
// from the same header (the wheel carries both).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "launcher_table.h"

namespace kreg {

struct TableRelocation {
  size_t offset;
  std::string kind;   // "symbol" or "string"
  std::string value;  // the symbol's name, or the text
};

struct TableImage {
  std::string bytes;  // sizeof(LauncherTable)
  std::vector<TableRelocation> relocations;
};

// Throws std::runtime_error for what an image cannot carry: tuned routes,
// an isolated op's output hooks, or a launcher that is no exported symbol.
TableImage launcher_table_image(const LauncherTable& table);

}  // namespace kreg
