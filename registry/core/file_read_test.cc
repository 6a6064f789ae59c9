#include "file_read.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

using test_support::TempDir;

TEST(FileRead, ReadsTheWholeFileBytesAsTheyAre) {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  const std::string bytes = std::string("a\0b\n", 4) + std::string(200000, 'x');  // past one read
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(read_file(path), bytes);
}

TEST(FileRead, MissingFilesAndFoldersReadAsNothing) {
  TempDir dir;
  EXPECT_EQ(read_file(dir.path() + "/absent"), std::nullopt);
  EXPECT_EQ(read_file(dir.path()), std::nullopt);  // a folder opens, and fails on read
}

}  // namespace
}  // namespace kreg
