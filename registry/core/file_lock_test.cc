#include "file_lock.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

namespace kreg {
namespace {

using test_support::TempDir;

TEST(FileLock, ExclusiveUntilReleased) {
  TempDir dir;
  const std::string path = dir.path() + "/k.lock";
  std::optional<FileLock> first = FileLock::try_acquire(path);
  ASSERT_TRUE(first);
  // flock() belongs to the open file description, so a second open in the
  // same process competes like another process would.
  EXPECT_FALSE(FileLock::try_acquire(path));
  const std::string holder = lock_holder(path);
  EXPECT_EQ(holder.rfind("pid=" + std::to_string(getpid()) + " host=", 0), 0u) << holder;
  EXPECT_NE(holder.find(" since="), std::string::npos);

  first->release();
  EXPECT_EQ(lock_holder(path), "");
  std::optional<FileLock> second = FileLock::try_acquire(path);
  EXPECT_TRUE(second);
}

TEST(FileLock, MoveTransfersOwnership) {
  TempDir dir;
  const std::string path = dir.path() + "/k.lock";
  std::optional<FileLock> lock = FileLock::try_acquire(path);
  ASSERT_TRUE(lock);
  FileLock moved = std::move(*lock);
  lock.reset();  // the moved-from lock must not release
  EXPECT_FALSE(FileLock::try_acquire(path));
  moved.release();
  EXPECT_TRUE(FileLock::try_acquire(path));
}

TEST(FileLock, ReleasedWhenHolderIsKilled) {
  TempDir dir;
  const std::string path = dir.path() + "/k.lock";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::optional<FileLock> lock = FileLock::try_acquire(path);
    const char ok = lock ? '1' : '0';
    if (write(ready[1], &ok, 1) != 1) _exit(2);
    for (;;) pause();  // hold until killed
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, '1');

  EXPECT_FALSE(FileLock::try_acquire(path));
  EXPECT_EQ(lock_holder(path).rfind("pid=" + std::to_string(child) + " ", 0), 0u);
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(FileLock::try_acquire(path));
}

TEST(FileLock, DamagedHolderLineIsPrintable) {
  TempDir dir;
  const std::string path = dir.path() + "/k.lock";
  {
    FILE* f = fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    fwrite("pid=\xff\x01\x80x\nrest", 1, 13, f);
    fclose(f);
  }
  EXPECT_EQ(lock_holder(path), "pid=???x");
}

TEST(FileLock, UnopenableLockFileThrows) {
  EXPECT_THROW(FileLock::try_acquire("/nonexistent/kreg/k.lock"), std::runtime_error);
  EXPECT_EQ(lock_holder("/nonexistent/kreg/k.lock"), "");
}

}  // namespace
}  // namespace kreg
