#include "atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "file_read.h"
#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

TEST(AtomicFile, WriteReplacesWholeAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.path() + "/memo.toml";
  write_file_atomic(path, "one");
  write_file_atomic(path, std::string("two\0three", 9), Sync::kUnsynced);
  EXPECT_EQ(read_file(path), std::string("two\0three", 9));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);  // no temporary left behind
}

TEST(AtomicFile, AMissingFolderThrowsNamingThePath) {
  TempDir dir;
  const std::string path = dir.path() + "/no/such/dir/x";
  try {
    write_file_atomic(path, "x");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kreg
