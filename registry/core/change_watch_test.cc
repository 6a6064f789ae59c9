#include "change_watch.h"
#include "temp_dir_for_tests.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace kreg {
namespace {

using test_support::TempDir;

// Stamps recorded as if a tick after the files were written: a stamp taken
// in its file's tick is racy (file_stamp.h) and never vouched for by a stat,
// which these tests of the watch are not about.
FileStamp settled(FileStamp stamp) {
  stamp.recorded_ns = stamp.stat.mtime_ns + kCoarseTimestampTickNs;
  return stamp;
}

std::vector<FileStamp> stamped(const std::vector<std::string>& paths) {
  std::vector<FileStamp> stamps;
  for (const std::string& path : paths) stamps.push_back(settled(*stamp_file(path)));
  return stamps;
}

// Runs each test only where the temporary folder's filesystem is one the
// watch trusts (on any other, every set is stat'ed, which file_stamp_test covers).
class ChangeWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    TempDir probe;
    std::vector<FileStamp> stamps = {settled(*stamp_file(probe.write("p.h", "p")))};
    WatchState state;
    stamps_unchanged_watched(stamps, state);
    if (state.mode != WatchState::kWatched) GTEST_SKIP() << "the temporary folder is not on a local filesystem";
  }

  // Writes `relative` ("abc") and watches it alone, verified quiet: most
  // tests then do one thing to the file and ask the watch.
  void watch_one_file(const std::string& relative);

  TempDir dir;
  std::string path;
  std::vector<FileStamp> stamps;
  WatchState state;
};

// A watched set whose stats were just found unchanged.
WatchState verified(const std::vector<FileStamp>& stamps) {
  WatchState state;
  EXPECT_TRUE(stamps_unchanged_watched(stamps, state));
  EXPECT_EQ(state.mode, WatchState::kWatched);
  return state;
}

// The way to tell the watch answered, not a stat: a stamp whose recorded stat
// is wrong makes any stat() say "changed", so "unchanged" can only come from
// a quiet watch.
void forget_true_stat(std::vector<FileStamp>& stamps) { stamps[0].stat.size += 1000; }

void ChangeWatch::watch_one_file(const std::string& relative) {
  path = dir.write(relative, "abc");
  stamps = stamped({path});
  state = verified(stamps);
}

TEST_F(ChangeWatch, AQuietWatchAnswersWithoutStat) {
  stamps = stamped({dir.write("k/a.h", "abc"), dir.write("k/b.cu", "x")});
  state = verified(stamps);
  forget_true_stat(stamps);
  EXPECT_TRUE(stamps_unchanged_watched(stamps, state));
  EXPECT_FALSE(stamps_unchanged(stamps));  // what a stat says
}

TEST_F(ChangeWatch, AnEditIsSeen) {
  watch_one_file("k/a.h");
  dir.write("k/a.h", "abd");  // same size
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));  // still changed: stat'ed again, not trusted
}

TEST_F(ChangeWatch, OtherFilesInTheFolderLeaveItQuiet) {
  watch_one_file("k/a.h");
  forget_true_stat(stamps);
  dir.write("k/.a.h.swp", "editor state");
  dir.write("k/notes.txt", "more");
  EXPECT_TRUE(stamps_unchanged_watched(stamps, state));
}

TEST_F(ChangeWatch, ASaveThatRenamesOverTheFileIsSeen) {
  watch_one_file("k/a.h");
  const std::string temp = dir.write("k/a.h.tmp", "abz");
  ASSERT_EQ(std::rename(temp.c_str(), path.c_str()), 0);
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
}

TEST_F(ChangeWatch, AnEditThroughAHardLinkElsewhereIsSeen) {
  path = dir.write("k/a.h", "abc");
  const std::string link = dir.path() + "/elsewhere.h";
  ASSERT_EQ(::link(path.c_str(), link.c_str()), 0);  // before the watch starts: linking is an event
  stamps = stamped({path});
  state = verified(stamps);
  int fd = ::open(link.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "Z", 1, 0), 1);
  ::close(fd);
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
}

TEST_F(ChangeWatch, AFolderAboveReplacedIsSeen) {
  watch_one_file("kernels/axpy/include/a.h");
  std::filesystem::rename(dir.path() + "/kernels", dir.path() + "/kernels.old");
  dir.write("kernels/axpy/include/a.h", "abd");
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
}

TEST_F(ChangeWatch, ADeletedFileIsSeenAndItsReplacementWatched) {
  watch_one_file("k/a.h");
  std::filesystem::remove(path);
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
  dir.write("k/a.h", "abc");
  std::vector<FileStamp> again = stamped({path});
  WatchState fresh = verified(again);
  dir.write("k/a.h", "abd");
  EXPECT_FALSE(stamps_unchanged_watched(again, fresh));
}

TEST_F(ChangeWatch, PathsThroughASymlinkAreStatted) {
  dir.write("real/a.h", "abc");
  std::filesystem::create_directory_symlink(dir.path() + "/real", dir.path() + "/link");
  stamps = stamped({dir.path() + "/link/a.h"});
  EXPECT_TRUE(stamps_unchanged_watched(stamps, state));
  EXPECT_EQ(state.mode, WatchState::kUnwatchable);
  forget_true_stat(stamps);
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
}

TEST_F(ChangeWatch, AForkedChildDoesNotTakeTheParentsEvents) {
  watch_one_file("k/a.h");
  dir.write("k/a.h", "abd");  // queued for the parent
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    WatchState copy = state;
    bool changed = !stamps_unchanged_watched(stamps, copy);
    ::_exit(changed ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
}

TEST_F(ChangeWatch, UnchangedAfterAChangeWasStattedIsQuietAgain) {
  watch_one_file("k/a.h");
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // a touch: an event, and a new stat
  EXPECT_FALSE(stamps_unchanged_watched(stamps, state));
  stamps = stamped({path});  // what a new build stamps
  state = verified(stamps);
  forget_true_stat(stamps);
  EXPECT_TRUE(stamps_unchanged_watched(stamps, state));
}

}  // namespace
}  // namespace kreg
