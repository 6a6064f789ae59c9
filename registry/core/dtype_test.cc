#include "dtype.h"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>
#include <utility>

#include "../include/kreg/abi.h"

namespace kreg {
namespace {

TEST(Dtype, NamesSuffixesAndCodesAreUniqueAndStable) {
  std::set<std::string> names, suffixes;
  for (const DtypeInfo& d : dtype_table()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_TRUE(suffixes.insert(d.suffix).second) << d.suffix;
  }
  // The first four slots predate the table: launcher tables and symbols rely on them.
  EXPECT_EQ(dtype_code("float32"), 0);
  EXPECT_EQ(dtype_code("float16"), 1);
  EXPECT_EQ(dtype_code("bfloat16"), 2);
  EXPECT_EQ(dtype_code("float64"), 3);
  EXPECT_EQ(dtype_suffix("int64"), "i64");
  EXPECT_EQ(dtype_suffix("half"), "");
  EXPECT_EQ(dtype_code("complex64"), -1);
  EXPECT_EQ(find_dtype("int8")->element_size, 1);
}

// kreg/abi.h spells the codes for C; they must be the table's.
TEST(Dtype, AbiHeaderCodesMatchTheTable) {
  const std::pair<int, const char*> abi_codes[] = {
      {KREG_DTYPE_FLOAT32, "float32"}, {KREG_DTYPE_FLOAT16, "float16"},
      {KREG_DTYPE_BFLOAT16, "bfloat16"}, {KREG_DTYPE_FLOAT64, "float64"},
      {KREG_DTYPE_INT8, "int8"}, {KREG_DTYPE_INT16, "int16"},
      {KREG_DTYPE_INT32, "int32"}, {KREG_DTYPE_INT64, "int64"},
      {KREG_DTYPE_UINT8, "uint8"}, {KREG_DTYPE_BOOL, "bool"},
      {KREG_DTYPE_FLOAT8_E4M3FN, "float8_e4m3fn"}, {KREG_DTYPE_FLOAT8_E5M2, "float8_e5m2"},
  };
  for (const auto& [code, name] : abi_codes) EXPECT_EQ(code, dtype_code(name)) << name;
  EXPECT_EQ(dtype_table().size(), std::size(abi_codes));  // a new dtype needs its KREG_DTYPE_ line too
}

}  // namespace
}  // namespace kreg
