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

inline constexpr uint64_t kTableMagic = 0x6b72656754424c32ULL;  // "kregTBL2"
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

struct LauncherTable {
  uint64_t magic;
  const char* op_name;            // "kernel.op", for error messages
  const char* dtypes;             // what the manifest lists, for error messages
  uint64_t same_shape_mask;       // bit i: argument i
  int32_t arg_dtypes[kMaxArgs];   // per argument: a fixed dtype code, or -1 (the dispatch dtype)
  TableOutputDecl outputs[kMaxOutputs];
  void* launchers[kTableDtypeSlots];  // by dtype code; null if not listed
};

// A table and the strings it points to, at one address for its lifetime.
class OwnedLauncherTable {
 public:
  const LauncherTable& table() const { return table_; }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(&table_); }

 private:
  friend std::unique_ptr<OwnedLauncherTable> make_launcher_table(
      const std::string&, const OpSpec&, const std::vector<std::pair<std::string, std::string>>&,
      const std::function<void*(const std::string&)>&);
  LauncherTable table_{};
  std::string op_name_, dtypes_;
};

// The table of `op` of `kernel`. symbols: (dtype, launcher symbol) per listed
// dtype, as a plan names them; find(symbol): its address in the kernel
// library, or null. Throws std::runtime_error naming every missing launcher
// and what to define (missing_launchers in launcher_header.h).
std::unique_ptr<OwnedLauncherTable> make_launcher_table(
    const std::string& kernel, const OpSpec& op, const std::vector<std::pair<std::string, std::string>>& symbols,
    const std::function<void*(const std::string&)>& find);

}  // namespace kreg
