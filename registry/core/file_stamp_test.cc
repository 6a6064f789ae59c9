#include "file_stamp.h"
#include "temp_dir_for_tests.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace kreg {
namespace {

using test_support::TempDir;

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
  set_mtime(path, 1700000000, 5);  // written long before the stamp: not racy (below)
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

// Rewrites the file in place (same inode), as an editor that truncates and
// writes does.
void rewrite_in_place(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

TEST(FileStamp, UnchangedSeesEachStatField) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  set_mtime(path, 1700000000, 0);
  std::vector<FileStamp> stamps = {*stamp_file(path)};
  ASSERT_TRUE(stamps_unchanged(stamps));

  dir.write("a.h", "abcd");  // size only
  set_mtime(path, 1700000000, 0);
  EXPECT_FALSE(stamps_unchanged(stamps));

  dir.write("a.h", "abc");
  set_mtime(path, 1700000000, 1);  // one nanosecond of mtime
  EXPECT_FALSE(stamps_unchanged(stamps));
  set_mtime(path, 1700000000, 0);
  EXPECT_TRUE(stamps_unchanged(stamps));

  // An atomic save: a new inode with the same size and mtime.
  const std::string replacement = dir.write("a.h.new", "abd");
  set_mtime(replacement, 1700000000, 0);
  ASSERT_EQ(std::rename(replacement.c_str(), path.c_str()), 0);
  EXPECT_FALSE(stamps_unchanged(stamps));

  std::filesystem::remove(path);
  EXPECT_FALSE(stamps_unchanged(stamps));
}

TEST(FileStamp, UnchangedChecksEveryFile) {
  TempDir dir;
  std::vector<FileStamp> stamps;
  for (const char* name : {"a.h", "b.h", "c.h"}) {
    const std::string path = dir.write(name, "x");
    set_mtime(path, 1700000000, 0);
    stamps.push_back(*stamp_file(path));
  }
  EXPECT_TRUE(stamps_unchanged(stamps));
  set_mtime(stamps.back().path, 1700000001, 0);  // the last one only
  EXPECT_FALSE(stamps_unchanged(stamps));
}

// True where the kernel gives a write a fine-grained mtime once the previous
// one was read (multigrain timestamps: Linux 6.13+ on ext4, xfs, btrfs, tmpfs).
bool multigrain_timestamps(const std::string& dir) {
  struct utsname u;
  int major = 0, minor = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  if (major < 6 || (major == 6 && minor < 13)) return false;
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return false;
  const auto type = static_cast<unsigned long>(fs.f_type);
  return type == 0xEF53 /* ext4 */ || type == 0x58465342 /* xfs */ || type == 0x9123683E /* btrfs */ ||
         type == 0x01021994 /* tmpfs */;
}

// The case a clock tick hides: the file was written, stamped, and rewritten
// with the same size, all at once. The stamp's stat asked for mtime, so on
// kernels with multigrain timestamps the rewrite must get a new mtime; a
// check that asked the kernel for less (a statx mask without mtime) would
// leave both writes in one coarse tick and miss the edit.
TEST(FileStamp, SameSizeEditRightAfterTheStamp) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  if (!multigrain_timestamps(std::filesystem::path(path).parent_path().string())) {
    GTEST_SKIP() << "file times here may share one coarse clock tick (no multigrain timestamps)";
  }
  for (int round = 0; round < 100; ++round) {
    rewrite_in_place(path, round % 2 ? "abc" : "abd");
    std::vector<FileStamp> stamps = {*stamp_file(path)};
    rewrite_in_place(path, round % 2 ? "abd" : "abc");  // same size, same inode, at once
    ASSERT_FALSE(stamps_unchanged(stamps)) << "round " << round;
  }
}

// Racy stamps, as git calls them: on a filesystem whose times tick coarsely
// (whole seconds here), a file written, stamped and rewritten with the same
// size within one tick keeps its stat. A stamp whose mtime is not older than
// its own recording by a tick is therefore re-hashed, however equal the stat.
TEST(FileStamp, RacyStampOnACoarseClockIsRehashed) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  const time_t this_second = time(nullptr);
  set_mtime(path, this_second, 0);  // what a whole-second filesystem records for a write now
  std::vector<FileStamp> stamps = {*stamp_file(path)};
  rewrite_in_place(path, "abd");
  set_mtime(path, this_second, 0);  // the same tick: same size, inode and mtime
  EXPECT_FALSE(stamps_unchanged(stamps));
  StampCheck check = check_stamps(stamps);
  ASSERT_EQ(check.changed.size(), 1u);
  EXPECT_EQ(check.changed[0], path);
}

TEST(FileStamp, RacyButUnchangedIsRehashedUntilItsTickHasPassed) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");  // a fine-grained mtime of just now
  std::vector<FileStamp> stamps = {*stamp_file(path)};
  EXPECT_FALSE(stamps_unchanged(stamps));  // racy: the stat alone cannot vouch for it yet
  EXPECT_TRUE(check_stamps(stamps).changed.empty());
  usleep(static_cast<useconds_t>(kFineTimestampTickNs / 1000 + 20000));
  StampCheck check = check_stamps(stamps);  // re-hashed and re-recorded after the tick
  EXPECT_TRUE(check.changed.empty());
  EXPECT_TRUE(check.refreshed);
  EXPECT_TRUE(stamps_unchanged(stamps));  // stat-only from now on
  EXPECT_FALSE(check_stamps(stamps).refreshed);
}

TEST(FileStamp, OldFilesAreNotRacy) {
  TempDir dir;
  const std::string path = dir.write("a.h", "abc");
  set_mtime(path, time(nullptr) - 10, 0);
  const FileStamp stamp = *stamp_file(path);
  EXPECT_FALSE(stamp_is_racy(stamp));
  EXPECT_GT(stamp.recorded_ns, stamp.stat.mtime_ns);
}

}  // namespace
}  // namespace kreg
