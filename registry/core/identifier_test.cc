#include "identifier.h"

#include <gtest/gtest.h>

#include <string>

namespace kreg {
namespace {

TEST(IdentifierTest, CIdentifiers) {
  for (const char* good : {"a", "_", "axpy", "Axpy_2", "_C", "ROWS", "x9"}) {
    EXPECT_TRUE(is_c_identifier(good)) << good;
  }
  for (const char* bad : {"", "9x", "a-b", "a.b", "a b", "na\xc3\xafve", "$x"}) {
    EXPECT_FALSE(is_c_identifier(bad)) << bad;
  }
  EXPECT_FALSE(is_c_identifier(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace kreg
