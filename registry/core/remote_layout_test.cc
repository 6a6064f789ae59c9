#include "remote_layout.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kreg {
namespace {

TEST(RemoteLayout, NamesAreVersionedAndPrefixed) {
  EXPECT_EQ(remote_object_key("0123abcd"), "kreg:v1:object:0123abcd");
  EXPECT_EQ(remote_kernel_key("axpy"), "kreg:v1:kernel:axpy");
  EXPECT_EQ(remote_claim_key("0123abcd"), "kreg:v1:claim:0123abcd");
  EXPECT_EQ(remote_file_key("deps/00ff.toml"), "kreg:v1:file:deps/00ff.toml");
}

TEST(RemoteLayout, RejectsNamesThatCouldEscapeTheirPlace) {
  for (const std::string& bad : {std::string(), std::string("a:b"), std::string("a/b"),
                                  std::string("x\0y", 3)}) {
    EXPECT_THROW(remote_object_key(bad), std::invalid_argument) << bad;
  }
  EXPECT_THROW(remote_kernel_key("kreg:v1:object"), std::invalid_argument);
  EXPECT_THROW(remote_claim_key("a/../b"), std::invalid_argument);
  for (const char* bad : {"", "/etc/passwd", "../x", "deps/../../x", "deps//x", "./x", "deps/"}) {
    EXPECT_THROW(remote_file_key(bad), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace kreg
