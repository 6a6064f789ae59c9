#include "dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

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
  EXPECT_EQ(KREG_DTYPE_FLOAT32, dtype_code("float32"));
  EXPECT_EQ(KREG_DTYPE_FLOAT16, dtype_code("float16"));
  EXPECT_EQ(KREG_DTYPE_BFLOAT16, dtype_code("bfloat16"));
  EXPECT_EQ(KREG_DTYPE_FLOAT64, dtype_code("float64"));
  EXPECT_EQ(KREG_DTYPE_INT8, dtype_code("int8"));
  EXPECT_EQ(KREG_DTYPE_INT16, dtype_code("int16"));
  EXPECT_EQ(KREG_DTYPE_INT32, dtype_code("int32"));
  EXPECT_EQ(KREG_DTYPE_INT64, dtype_code("int64"));
  EXPECT_EQ(KREG_DTYPE_UINT8, dtype_code("uint8"));
  EXPECT_EQ(KREG_DTYPE_BOOL, dtype_code("bool"));
  EXPECT_EQ(KREG_DTYPE_FLOAT8_E4M3FN, dtype_code("float8_e4m3fn"));
  EXPECT_EQ(KREG_DTYPE_FLOAT8_E5M2, dtype_code("float8_e5m2"));
  EXPECT_EQ(dtype_table().size(), 12u);  // a new dtype needs its KREG_DTYPE_ line too
}

}  // namespace
}  // namespace kreg
