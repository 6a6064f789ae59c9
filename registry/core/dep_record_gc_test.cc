// Dependency records after gc() and clear(): a record none of whose builds is
// left in objects/ could only ever miss, so it goes with the last of them.
#include "cache_store.h"
#include "dep_record.h"
#include "file_lock.h"
#include "temp_dir_for_tests.h"
#include "atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kreg {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

std::string key_named(const std::string& name) { return hash_bytes(name).hex(); }

void publish(const CacheStore& store, const std::string& key) {
  const std::string staging = store.make_staging_dir();
  std::ofstream(staging + "/lib.so", std::ios::binary) << "ELF bytes of " << key;
  Entry entry;
  entry.key = key;
  entry.kernel = "axpy";
  entry.backend = "cpu";
  entry.kind = "kernel-lib";
  entry.artifact = "lib.so";
  store.publish(staging, entry);
}

// A record for `base` whose entries name `keys`, newest first.
void write_record(const CacheStore& store, const std::string& base, const std::vector<std::string>& keys) {
  DepRecord record{base, {}};
  for (const std::string& key : keys) record.entries.push_back(DepEntry{key, {}});
  write_file_atomic(store.deps_path(base), dep_record_to_toml(record));
}

TEST(DepRecordGc, ClearRemovesRecordsWhoseBuildsAreGone) {
  TempDir dir;
  CacheStore store(dir.path());
  publish(store, key_named("v1"));
  publish(store, key_named("v2"));
  write_record(store, key_named("base"), {key_named("v2"), key_named("v1")});
  const Pin kept = store.pin(key_named("v2"));  // a live process loaded v2
  write_record(store, key_named("other base"), {key_named("v1")});

  const GcReport report = store.clear();
  EXPECT_EQ(report.removed, std::vector<std::string>{key_named("v1")});
  EXPECT_EQ(report.records_removed, 1);
  EXPECT_TRUE(fs::exists(store.deps_path(key_named("base"))));  // v2 is still there
  EXPECT_FALSE(fs::exists(store.deps_path(key_named("other base"))));
}

TEST(DepRecordGc, UnreadableRecordsGoAndBusyOnesStay) {
  TempDir dir;
  CacheStore store(dir.path());
  publish(store, key_named("v1"));
  std::ofstream(store.deps_path(key_named("garbage"))) << "not toml [[[";
  write_record(store, key_named("building"), {key_named("gone")});
  // A build of that base key holds its lock: it may be rewriting the record.
  const std::optional<FileLock> building = FileLock::try_acquire(store.lock_path(key_named("building")));
  ASSERT_TRUE(building);

  const GcReport report = store.gc(0);
  EXPECT_EQ(report.removed, std::vector<std::string>{key_named("v1")});
  EXPECT_EQ(report.records_removed, 1);
  EXPECT_FALSE(fs::exists(store.deps_path(key_named("garbage"))));
  EXPECT_TRUE(fs::exists(store.deps_path(key_named("building"))));
}

TEST(DepRecordGc, AGcThatRemovesNothingLeavesRecordsAlone) {
  TempDir dir;
  CacheStore store(dir.path());
  publish(store, key_named("v1"));
  write_record(store, key_named("base"), {key_named("never built")});
  const GcReport report = store.gc(1 << 30);
  EXPECT_TRUE(report.removed.empty());
  EXPECT_EQ(report.records_removed, 0);
  EXPECT_TRUE(fs::exists(store.deps_path(key_named("base"))));
}

}  // namespace
}  // namespace kreg
