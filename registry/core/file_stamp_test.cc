#include "file_stamp.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kreg {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/kreg-stamp-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }

 private:
  std::string path_;
};

// Sets the mtime to a fixed, distinct value: same-tick writes would otherwise
// leave the stat unchanged and hide what the test is about.
void set_mtime(const std::string& path, time_t seconds, long nanos) {
  const struct timespec times[2] = {{seconds, nanos}, {seconds, nanos}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(FileStamp, StatHasNanosecondsAndInode) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  set_mtime(path, 1700000000, 123456789);
  std::optional<FileStat> stat = stat_file(path);
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->size, 3);
  EXPECT_EQ(stat->mtime_ns, 1700000000LL * 1000000000 + 123456789);
  EXPECT_NE(stat->inode, 0u);
  EXPECT_FALSE(stat_file(path + ".missing"));
  EXPECT_FALSE(stamp_file(path + ".missing"));
}

TEST(FileStamp, UnchangedIsStatOnly) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  std::vector<FileStamp> stamps = {*stamp_file(path)};
  EXPECT_TRUE(stamps_unchanged(stamps));
  StampCheck check = check_stamps(stamps);
  EXPECT_TRUE(check.changed.empty());
  EXPECT_FALSE(check.refreshed);
}

TEST(FileStamp, TouchRefreshesButIsNotAChange) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  set_mtime(path, 1700000000, 0);
  std::vector<FileStamp> stamps = {*stamp_file(path)};
  set_mtime(path, 1700000001, 5);
  EXPECT_FALSE(stamps_unchanged(stamps));
  StampCheck check = check_stamps(stamps);
  EXPECT_TRUE(check.changed.empty());
  EXPECT_TRUE(check.refreshed);
  // The refreshed stat makes the next check stat-only again.
  EXPECT_TRUE(stamps_unchanged(stamps));
  EXPECT_FALSE(check_stamps(stamps).refreshed);
}

TEST(FileStamp, ContentEditIsAChange) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  set_mtime(path, 1700000000, 0);
  std::vector<FileStamp> stamps = {*stamp_file(path)};
  dir.write("a.h", "abd");  // same size, different bytes
  set_mtime(path, 1700000002, 0);
  StampCheck check = check_stamps(stamps);
  ASSERT_EQ(check.changed.size(), 1u);
  EXPECT_EQ(check.changed[0], path);
}

TEST(FileStamp, DeletionIsAChange) {
  TempDir dir;
  const std::string keep = dir.write("keep.h", "1");
  const std::string gone = dir.write("gone.h", "2");
  std::vector<FileStamp> stamps = {*stamp_file(keep), *stamp_file(gone)};
  std::filesystem::remove(gone);
  EXPECT_FALSE(stamps_unchanged(stamps));
  StampCheck check = check_stamps(stamps);
  EXPECT_EQ(check.changed, std::vector<std::string>{gone});
}

}  // namespace
}  // namespace kreg
