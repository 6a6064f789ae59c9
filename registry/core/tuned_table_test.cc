#include "tuned_table.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kreg {
namespace {

TunedTable sample() {
  TunedTable t;
  t.kernel = "softmax";
  t.backend = "cuda";
  t.key = "0123456789abcdef0123456789abcdef";
  t.put({"softmax", "float32", "4096x256", "sm_90", "PACKS=2,BLOCK=256", 1.5e-5, 2.0e-5});
  t.put({"softmax", "float32", "1024x32768", "sm_90", "PACKS=8,BLOCK=128", 3.25e-4, 3.5e-4});
  return t;
}

TEST(TunedTableTest, RoundTripsThroughAFile) {
  test_support::TempDir tmp;
  const std::string path = tuned_table_path(tmp.path() + "/tuned", "softmax", "cuda", sample().key);
  EXPECT_EQ(path, tmp.path() + "/tuned/softmax.cuda.0123456789abcdef.table");
  write_tuned_table(path, sample());
  std::optional<TunedTable> back = read_tuned_table(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->kernel, "softmax");
  EXPECT_EQ(back->key, sample().key);
  ASSERT_EQ(back->wins.size(), 2u);
  EXPECT_EQ(back->wins[1].bucket, "1024x32768");
  EXPECT_EQ(back->wins[1].config, "PACKS=8,BLOCK=128");
  EXPECT_DOUBLE_EQ(back->wins[1].seconds, 3.25e-4);
  EXPECT_DOUBLE_EQ(back->wins[0].default_seconds, 2.0e-5);
}

TEST(TunedTableTest, PutReplacesTheSameSlot) {
  TunedTable t = sample();
  t.put({"softmax", "float32", "4096x256", "sm_90", "PACKS=4,BLOCK=128", 1e-5, 2e-5});
  ASSERT_EQ(t.wins.size(), 2u);
  EXPECT_EQ(t.wins[0].config, "PACKS=4,BLOCK=128");
  t.put({"softmax", "float32", "4096x256", "sm_80", "PACKS=4,BLOCK=128", 1e-5, 2e-5});
  EXPECT_EQ(t.wins.size(), 3u);  // another arch is another slot
}

TEST(TunedTableTest, OtherVersionsAndDamageReadAsNoTable) {
  std::string text = format_tuned_table(sample());
  EXPECT_TRUE(parse_tuned_table(text));
  std::string future = text;
  future.replace(future.find(" 1\n"), 3, " 2\n");
  EXPECT_FALSE(parse_tuned_table(future));
  EXPECT_FALSE(parse_tuned_table(text.substr(0, text.size() - 8)));  // a cut win line
  EXPECT_FALSE(parse_tuned_table("kreg-tuned-table 1\nkernel softmax\n"));  // no key
  EXPECT_FALSE(parse_tuned_table(text + "bogus line\n"));
}

TEST(TunedTableTest, OtherKeysFindTablesOfOtherCode) {
  test_support::TempDir tmp;
  const std::string dir = tmp.path() + "/tuned";
  TunedTable old = sample();
  write_tuned_table(tuned_table_path(dir, "softmax", "cuda", old.key), old);
  TunedTable rms = sample();
  rms.kernel = "rmsnorm";
  rms.key = "ffff456789abcdef0123456789abcdef";
  write_tuned_table(tuned_table_path(dir, "rmsnorm", "cuda", rms.key), rms);
  EXPECT_EQ(other_tuned_keys(dir, "softmax", "cuda", "aaaa"), std::vector<std::string>{old.key});
  EXPECT_TRUE(other_tuned_keys(dir, "softmax", "cuda", old.key).empty());  // its own table is not "other"
  EXPECT_TRUE(other_tuned_keys(dir, "softmax", "cpu", "aaaa").empty());
  EXPECT_TRUE(other_tuned_keys(tmp.path() + "/missing", "softmax", "cuda", "aaaa").empty());
}

TEST(TunedTableTest, ShapeBuckets) {
  EXPECT_EQ(shape_bucket({4096, 256}), "4096x256");
  EXPECT_EQ(shape_bucket({4000, 250}), "4096x256");
  EXPECT_EQ(shape_bucket({4097, 1}), "8192x1");
  EXPECT_EQ(shape_bucket({0, 3}), "0x4");
  EXPECT_EQ(shape_bucket({}), "scalar");
}

}  // namespace
}  // namespace kreg
