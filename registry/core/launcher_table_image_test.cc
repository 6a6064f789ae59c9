#include "launcher_table_image.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace kreg {
namespace {

// abort: an exported libc function with no IFUNC, standing in for a launcher.
void* exported_function() { return reinterpret_cast<void*>(&abort); }

LauncherTable plain_table() {
  LauncherTable t{};
  t.magic = kTableMagic;
  t.op_name = "axpy.axpy";
  t.dtypes = "float32";
  t.arg_names[0] = "x";
  t.arg_names[1] = "y";
  t.arg_count = 2;
  t.launchers[0] = exported_function();
  return t;
}

TEST(LauncherTableImage, PointersBecomeRelocationsAndTheRestIsTheTablesBytes) {
  const LauncherTable t = plain_table();
  const TableImage image = launcher_table_image(t);
  ASSERT_EQ(image.bytes.size(), sizeof(LauncherTable));
  ASSERT_EQ(image.relocations.size(), 5u);
  EXPECT_EQ(image.relocations[0].offset, offsetof(LauncherTable, op_name));
  EXPECT_EQ(image.relocations[0].kind, "string");
  EXPECT_EQ(image.relocations[0].value, "axpy.axpy");
  EXPECT_EQ(image.relocations[3].value, "y");
  EXPECT_EQ(image.relocations[4].offset, offsetof(LauncherTable, launchers));
  EXPECT_EQ(image.relocations[4].kind, "symbol");
  EXPECT_EQ(image.relocations[4].value, "abort");

  // Patched back, the bytes are the table's.
  std::string rebuilt = image.bytes;
  for (const TableRelocation& r : image.relocations) {
    const void* pointer = r.kind == "symbol" ? exported_function()
                          : r.value == "axpy.axpy" ? static_cast<const void*>(t.op_name)
                          : r.value == "float32"   ? static_cast<const void*>(t.dtypes)
                          : r.value == "x"         ? static_cast<const void*>(t.arg_names[0])
                                                   : static_cast<const void*>(t.arg_names[1]);
    std::memcpy(&rebuilt[r.offset], &pointer, sizeof(pointer));
  }
  EXPECT_EQ(std::memcmp(rebuilt.data(), &t, sizeof(LauncherTable)), 0);
}

TEST(LauncherTableImage, WhatAnImageCannotCarryIsRefused) {
  LauncherTable routed = plain_table();
  routed.route_count = 1;
  EXPECT_THROW(launcher_table_image(routed), std::runtime_error);
  LauncherTable isolated = plain_table();
  isolated.output_padding = 64;
  EXPECT_THROW(launcher_table_image(isolated), std::runtime_error);
  LauncherTable stray = plain_table();
  static int not_a_symbol = 0;
  stray.launchers[1] = &not_a_symbol;
  EXPECT_THROW(launcher_table_image(stray), std::runtime_error);
}

}  // namespace
}  // namespace kreg
