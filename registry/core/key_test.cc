#include "key.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace kreg {
namespace {

KeyBuilder base_inputs() {
  KeyBuilder b;
  b.add("kernel", "axpy").add("backend", "cpu").add("kind", "kernel-lib");
  b.add_list("flags.cpu", {"-O3", "-march=native"});
  b.add_file_digest("axpy.cpp", hash_bytes("int main() {}"));
  b.add("env.torch", "2.13.0");
  return b;
}

TEST(KeyBuilder, AddOrderDoesNotMatter) {
  KeyBuilder reversed;
  reversed.add("env.torch", "2.13.0");
  reversed.add_file_digest("axpy.cpp", hash_bytes("int main() {}"));
  reversed.add_list("flags.cpu", {"-O3", "-march=native"});
  reversed.add("kind", "kernel-lib").add("backend", "cpu").add("kernel", "axpy");
  const Key a = base_inputs().finish();
  const Key b = reversed.finish();
  EXPECT_EQ(a.digest, b.digest);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].value, b.inputs[i].value);
  }
}

TEST(KeyBuilder, InputsSortedUniqueAndFormatRecorded) {
  KeyBuilder b = base_inputs();
  b.add("kernel", "axpy2");  // replaces
  const Key key = b.finish();
  for (size_t i = 1; i < key.inputs.size(); ++i) {
    EXPECT_LT(key.inputs[i - 1].name, key.inputs[i].name);
  }
  size_t kernels = 0;
  bool has_format = false;
  for (const KeyInput& input : key.inputs) {
    if (input.name == "kernel") {
      ++kernels;
      EXPECT_EQ(input.value, "axpy2");
    }
    if (input.name == "key.format") {
      has_format = true;
      EXPECT_EQ(input.value, std::to_string(kKeyFormat));
    }
  }
  EXPECT_EQ(kernels, 1u);
  EXPECT_TRUE(has_format);
}

TEST(KeyBuilder, ReplacingAnInputChangesTheKey) {
  const Key before = base_inputs().finish();
  EXPECT_NE(before.digest, base_inputs().add("kernel", "axpy2").finish().digest);
  EXPECT_NE(before.digest, base_inputs().add("backend", "cuda").finish().digest);
  EXPECT_NE(before.digest, base_inputs().add("env.torch", "2.14.1").finish().digest);
  EXPECT_NE(before.digest, base_inputs().add_list("flags.cpu", {"-O2"}).finish().digest);
  EXPECT_NE(before.digest,
            base_inputs().add_file_digest("axpy.cpp", hash_bytes("x")).finish().digest);
  EXPECT_NE(before.digest, base_inputs().add("env.cuda", "13.0").finish().digest);
  // Same value under another name is a different input.
  KeyBuilder renamed;
  renamed.add("a", "1");
  KeyBuilder other;
  other.add("b", "1");
  EXPECT_NE(renamed.finish().digest, other.finish().digest);
}

TEST(KeyBuilder, ListItemsAreDelimited) {
  KeyBuilder split;
  split.add_list("flags.cpu", {"-I", "-O2"});
  KeyBuilder joined;
  joined.add_list("flags.cpu", {"-I-O2"});
  EXPECT_NE(split.finish().digest, joined.finish().digest);
  KeyBuilder empty_item;
  empty_item.add_list("flags.cpu", {"-I-O2", ""});
  EXPECT_NE(joined.finish().digest, empty_item.finish().digest);
  EXPECT_EQ(split.finish().inputs.front().name, "flags.cpu");
  EXPECT_EQ(split.finish().inputs.front().value, std::string("-I\0-O2", 6));
}

TEST(KeyBuilder, FileContentChangesTheKey) {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/kreg-key-XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const std::string path = dir + "/axpy.h";
  std::ofstream(path) << "v1";
  const Key first = KeyBuilder().add_file("axpy.h", path).finish();
  EXPECT_EQ(first.digest, KeyBuilder().add_file("axpy.h", path).finish().digest);
  std::ofstream(path, std::ios::trunc) << "v2";
  const Key second = KeyBuilder().add_file("axpy.h", path).finish();
  EXPECT_NE(first.digest, second.digest);
  EXPECT_EQ(second.inputs.front().name, "file:axpy.h");
  EXPECT_EQ(second.inputs.front().value, hash_bytes("v2").hex());
  std::filesystem::remove_all(dir);
}

TEST(KeyBuilder, UnreadableFileThrowsNamingThePath) {
  try {
    KeyBuilder().add_file("gone.h", "/nonexistent/kreg/gone.h");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kreg/gone.h"), std::string::npos);
  }
}

TEST(KeyDiff, DescribesEachDifference) {
  const std::vector<KeyInput> before = {
      {"env.torch", "2.13.0"},
      {"file:include/axpy_math.h", hash_bytes("a").hex()},
      {"file:old.h", hash_bytes("o").hex()},
      {"flags.cuda", "-O3"},
      {"kernel", "axpy"},
  };
  const std::vector<KeyInput> after = {
      {"kernel", "axpy"},  // deliberately unsorted
      {"env.torch", "2.14.1"},
      {"file:extra.h", hash_bytes("e").hex()},
      {"file:include/axpy_math.h", hash_bytes("b").hex()},
      {"flags.cuda", std::string("-O3\0-lineinfo", 13)},
  };
  const std::vector<std::string> expected = {
      "env.torch: 2.13.0 -> 2.14.1",
      "file:extra.h added",
      "file:include/axpy_math.h changed",
      "file:old.h removed",
      "flags.cuda: -O3 -> -O3 -lineinfo",
  };
  EXPECT_EQ(diff_key_inputs(before, after), expected);
  EXPECT_TRUE(diff_key_inputs(before, before).empty());
}

}  // namespace
}  // namespace kreg
