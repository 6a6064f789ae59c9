#include "dtype.h"

namespace kreg {

const std::vector<DtypeInfo>& dtype_table() {
  // float8 types are listed whatever the toolkit: a launcher for them is only
  // needed when a manifest lists them, and torch >= 2.1 has both.
  static const std::vector<DtypeInfo> kTable = {
      {"float32", "f32", "Float", 4, true},
      {"float16", "f16", "Half", 2, true},
      {"bfloat16", "bf16", "BFloat16", 2, true},
      {"float64", "f64", "Double", 8, true},
      {"int8", "i8", "Char", 1, false},
      {"int16", "i16", "Short", 2, false},
      {"int32", "i32", "Int", 4, false},
      {"int64", "i64", "Long", 8, false},
      {"uint8", "u8", "Byte", 1, false},
      {"bool", "b8", "Bool", 1, false},
      {"float8_e4m3fn", "f8e4m3", "Float8_e4m3fn", 1, true},
      {"float8_e5m2", "f8e5m2", "Float8_e5m2", 1, true},
  };
  return kTable;
}

const DtypeInfo* find_dtype(const std::string& name) {
  for (const DtypeInfo& d : dtype_table()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

int dtype_code(const std::string& name) {
  const auto& table = dtype_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (name == table[i].name) return static_cast<int>(i);
  }
  return -1;
}

std::string dtype_suffix(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  return d ? d->suffix : "";
}

std::string dtype_names() {
  std::string out;
  for (const DtypeInfo& d : dtype_table()) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

}  // namespace kreg
