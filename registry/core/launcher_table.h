// The launcher table: how a compiled binding finds one kernel version's code.
//
// The generated binding is compiled once per op signature; the kernel library
// once per kernel version. The binding's op takes the address of a table
// holding what the manifest declares about the op (fixed argument dtypes,
// same-shape arguments, output shapes) and the launcher addresses found in
// the kernel library. Swapping the table an Op handle passes is how a new
// kernel version goes live without touching the binding.
//
// LauncherTable below is the layout the binding reads: its text twin is in
// binding_text.cc (generated code includes no core header), and both change
// together with kTableMagic. A table is never freed while its process may
// call it: Python keeps every table an Op ever used (op.py).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "table_limits.h"
#include "dtype.h"
#include "manifest.h"

namespace kreg {

inline constexpr uint64_t kTableMagic = 0x6b72656754424c35ULL;  // "kregTBL5": 3 added the routes, 4 the output hooks, 5 the signature
inline constexpr int kTableDtypeSlots = 12;  // dtype_table().size(), checked by the test

struct TableDimTerm {
  int32_t kind;  // DimTerm::Kind
  int32_t arg;
  int64_t a;
  int64_t b;
};

struct TableOutputDecl {
  int32_t dtype_code;  // a fixed dtype, or -1
  int32_t dtype_arg;   // else the dtype of this argument
  int32_t ndims;
  int32_t unused;
  TableDimTerm dims[kMaxOutputDims];
};

// A tuned route (tuned_table.h): calls whose dispatch dtype is `dtype_slot`
// and whose first Tensor argument's shape falls in `bucket` (every dim d with
// bucket/2 < d <= bucket, 0 for 0: shape_bucket()) run `launcher`, another
// config's launcher of the same op.
inline constexpr int kMaxRouteDims = 8;
struct TableRoute {
  int32_t dtype_slot;
  int32_t ndims;
  int64_t bucket[kMaxRouteDims];
  void* launcher;
};

struct LauncherTable {
  uint64_t magic;
  const char* op_name;            // "kernel.op", for error messages
  const char* dtypes;             // what the manifest lists, for error messages
  uint64_t same_shape_mask;       // bit i: argument i
  int32_t arg_dtypes[kMaxArgs];   // per argument: a fixed dtype code, or -1 (the dispatch dtype)
  TableOutputDecl outputs[kMaxOutputs];
  void* launchers[kTableDtypeSlots];  // by dtype code; null if not listed
  int64_t route_count;                // 0 unless registry.tune's winners are in use
  const TableRoute* routes;           // route_count of them, tried in order
  // An isolated CPU op's table (registry/isolation/proxy.py) sets these to the
  // shared output pool's (shared_output_pool.h): its outputs of 64 KiB and
  // more are memory its worker maps. Null in every other table.
  void* (*shared_output_allocate)(int64_t nbytes);
  void (*shared_output_release)(void* pointer);
  // The op's signature, as the shared binding (codegen.h) reads it: one
  // compiled binding serves every signature, so the table says what the
  // arguments are and the kernel library's entry (kreg_entry_fn) spreads them.
  const void* entry;              // kreg_entry__<op> in the kernel library
  int32_t arg_count;
  int32_t return_count;
  int32_t first_tensor;           // the first Tensor argument that is not optional
  int32_t unused;
  uint64_t mutated_mask;          // bit i: argument i is a Tensor(a!)
  char arg_kinds[kMaxArgs];       // per argument: a TableArgKind
  const char* arg_names[kMaxArgs];
};

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
