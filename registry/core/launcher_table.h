// The launcher table: how a compiled binding finds one kernel version's code.
//
// The generated binding is compiled once per op signature; the kernel library
// once per kernel version. The binding's op takes the address of a table
// holding what the manifest declares about the op (fixed argument dtypes,
// same-shape arguments, output shapes) and the launcher addresses found in
// the kernel library. Swapping the table an Op handle passes is how a new
// kernel version goes live without touching the binding.
//
// The layout is declared once, in registry/include/kreg/launcher_table.h (C,
// torch-free), which the generated binding includes and
// registry/isolation/proxy.py mirrors in ctypes (checked against
// table_layout() by a test). A table is never freed while its process may
// call it: Python keeps every table an Op ever used (op.py).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../include/kreg/launcher_table.h"
#include "table_limits.h"
#include "dtype.h"
#include "manifest.h"

namespace kreg {

inline constexpr uint64_t kTableMagic = KREG_TABLE_MAGIC;
inline constexpr int kTableDtypeSlots = KREG_TABLE_DTYPE_SLOTS;  // dtype_table().size(), checked by the test
inline constexpr int kMaxRouteDims = KREG_TABLE_MAX_ROUTE_DIMS;

using TableDimTerm = kreg_launcher_dim_term;
using TableOutputDecl = kreg_launcher_output_decl;
using TableRoute = kreg_launcher_route;
using LauncherTable = kreg_launcher_table;

// LauncherTable::arg_kinds.
enum TableArgKind : char {
  kKindTensor = 'T',
  kKindOptionalTensor = 'O',
  kKindFloat = 'f',
  kKindInt = 'i',
  kKindBool = 'b',
  kKindIntList = 'l',
  kKindScalarType = 's',
};

struct Route;

// A table and the strings it points to, at one address for its lifetime.
class OwnedLauncherTable {
 public:
  const LauncherTable& table() const { return table_; }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(&table_); }

 private:
  friend std::unique_ptr<OwnedLauncherTable> make_launcher_table(
      const std::string&, const OpSpec&, const std::vector<std::pair<std::string, std::string>>&,
      const std::function<void*(const std::string&)>&);
  friend std::unique_ptr<OwnedLauncherTable> routed_launcher_table(const OwnedLauncherTable&,
                                                                    const std::vector<Route>&);
  LauncherTable table_{};
  std::string op_name_, dtypes_;
  std::vector<std::string> arg_names_;
  std::vector<TableRoute> routes_;
};

// The table of `op` of `kernel`. symbols: (dtype, launcher symbol) per listed
// dtype, as a plan names them; find(symbol): its address in the kernel
// library, or null (the op's entry, entry_symbol, is looked up too). Throws std::runtime_error naming every missing launcher
// and what to define (missing_launchers in launcher_header.h).
std::unique_ptr<OwnedLauncherTable> make_launcher_table(
    const std::string& kernel, const OpSpec& op, const std::vector<std::pair<std::string, std::string>>& symbols,
    const std::function<void*(const std::string&)>& find);

// One winner of the tuned table, for routed_launcher_table.
struct Route {
  std::string dtype;    // a dtype name of the table
  std::string bucket;   // shape_bucket() text, e.g. "4096x256"
  uintptr_t launcher;   // the winning config's launcher for that dtype (its kernel library stays loaded)
};

// A copy of `base` whose calls in a route's (dtype, bucket) run the route's
// launcher, the others base's. Throws std::runtime_error on a bad bucket.
std::unique_ptr<OwnedLauncherTable> routed_launcher_table(const OwnedLauncherTable& base,
                                                          const std::vector<Route>& routes);

}  // namespace kreg
