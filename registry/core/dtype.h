// The dtype table: the one place that names the element types an op can take.
//
// Everything else derives from it: the manifest's accepted names, launcher
// symbol suffixes (axpy_f32), the launcher table slots of the generated
// binding (core/launcher_table.h), the codes a
// launcher receives for a ScalarType? argument (KREG_DTYPE_* in
// registry/include/kreg/abi.h, checked against this table by dtype_test.cc),
// and the torch dtype names Python maps to.
#pragma once

#include <string>
#include <vector>

namespace kreg {

struct DtypeInfo {
  const char* name;         // manifest and torch name: "float32" (torch.float32)
  const char* suffix;       // launcher symbol suffix: "f32"
  const char* scalar_type;  // c10::ScalarType enumerator: "Float"
  int element_size;         // bytes
  bool floating;            // a floating-point type (reductions compute in float)
};

// In slot order: a dtype's index here is its code (KREG_DTYPE_*) and its slot
// in a launcher table. Append only: codes are part of the kernel ABI.
const std::vector<DtypeInfo>& dtype_table();

// nullptr when the name is not in the table.
const DtypeInfo* find_dtype(const std::string& name);

// The code (index in the table), or -1.
int dtype_code(const std::string& name);

// Suffix used in launcher symbols: float32 -> "f32". Empty for an unknown dtype.
std::string dtype_suffix(const std::string& dtype);

// "float32, float16, ..." for error messages.
std::string dtype_names();

}  // namespace kreg
