#include "closest_name.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kreg {
namespace {

TEST(ClosestNameTest, FindsPlausibleTypos) {
  const std::vector<std::string> names = {"axpy", "relu", "softmax", "layer_norm"};
  EXPECT_EQ(closest_name("axyp", names), "axpy");     // distance 2
  EXPECT_EQ(closest_name("softmx", names), "softmax");  // distance 1
  EXPECT_EQ(closest_name("relu", names), "relu");     // exact
  EXPECT_EQ(closest_name("layernorm", names), "layer_norm");
}

TEST(ClosestNameTest, RejectsFarNames) {
  const std::vector<std::string> names = {"axpy", "relu"};
  EXPECT_EQ(closest_name("matmul", names), "");
  EXPECT_EQ(closest_name("ax", {}), "");
}

TEST(ClosestNameTest, ThresholdIsMaxOfTwoAndLengthOverThree) {
  // Length 4: limit 2.
  EXPECT_EQ(closest_name("abcd", {"abxy"}), "abxy");   // distance 2
  EXPECT_EQ(closest_name("abcd", {"axyz"}), "");       // distance 3
  // Length 12: limit 4.
  EXPECT_EQ(closest_name("abcdefghijkl", {"abcdefghwxyz"}), "abcdefghwxyz");  // distance 4
  EXPECT_EQ(closest_name("abcdefghijkl", {"abcdefgvwxyz"}), "");              // distance 5
}

TEST(ClosestNameTest, PrefersSmallestDistanceThenEarliest) {
  EXPECT_EQ(closest_name("axpz", {"abzz", "axpy"}), "axpy");
  EXPECT_EQ(closest_name("ab", {"ax", "ay"}), "ax");
}

}  // namespace
}  // namespace kreg
