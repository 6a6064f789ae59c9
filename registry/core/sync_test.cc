// Which writes fsync: publishing an entry, the memo and the dependency record
// do not (atomic_file.h says why that is safe); write_file_atomic's durable
// default does. fsync and fdatasync are interposed for this test binary
// (a definition in the executable wins over libc's) and counted.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "atomic_file.h"
#include "cache_store.h"
#include "dep_record.h"
#include "memo.h"
#include "temp_dir_for_tests.h"

namespace {
std::atomic<int> g_syncs{0};

template <typename Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}
}  // namespace

extern "C" int fsync(int fd) {
  ++g_syncs;
  static auto next = real<int (*)(int)>("fsync");
  return next(fd);
}

extern "C" int fdatasync(int fd) {
  ++g_syncs;
  static auto next = real<int (*)(int)>("fdatasync");
  return next(fd);
}

namespace kreg {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;

TEST(SyncPolicy, PublishingAnEntryDoesNotFsync) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string staging = store.make_staging_dir();
  std::ofstream(staging + "/lib.so", std::ios::binary) << "ELF bytes";
  Entry entry;
  entry.key = hash_bytes("key").hex();
  entry.kernel = "axpy";
  entry.backend = "cpu";
  entry.kind = "kernel-lib";
  entry.artifact = "lib.so";
  const int before = g_syncs;
  store.publish(staging, entry);
  EXPECT_EQ(g_syncs - before, 0);
  EXPECT_TRUE(store.lookup(entry.key).entry);  // published all the same
}

TEST(SyncPolicy, TheMemoAndTheDependencyRecordAreWrittenWithoutFsync) {
  TempDir dir;
  Memo memo;
  memo.kernel = "axpy";
  memo.backend = "cpu";
  memo.keys["lib"] = hash_bytes("lib").hex();
  const Key base{hash_bytes("base"), {}};
  const int before = g_syncs;
  write_memo(dir.path() + "/memo.toml", memo);
  add_dep_entry(dir.path() + "/deps.toml", base, DepEntry{hash_bytes("k").hex(), {}});
  EXPECT_EQ(g_syncs - before, 0);
  EXPECT_TRUE(read_memo(dir.path() + "/memo.toml"));
  EXPECT_TRUE(read_dep_record(dir.path() + "/deps.toml"));
}

TEST(SyncPolicy, WriteFileAtomicIsDurableByDefault) {
  TempDir dir;
  const int before = g_syncs;
  write_file_atomic(dir.path() + "/f.txt", "text");
  EXPECT_EQ(g_syncs - before, 2);  // the file before the rename, the folder after
  write_file_atomic(dir.path() + "/g.txt", "text", Sync::kUnsynced);
  EXPECT_EQ(g_syncs - before, 2);
}

}  // namespace
}  // namespace kreg
