#include "cache_store.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace kreg {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::string kArtifact = "libkreg_axpy_cpu.so";

// What a build leaves behind: a staging folder with an artifact and a log.
std::string stage_build(const CacheStore& store, const std::string& bytes) {
  const std::string staging = store.make_staging_dir();
  write_text(staging + "/" + kArtifact, bytes);
  write_text(staging + "/build.log", "g++ -O3 ...\n");
  return staging;
}

Entry sample_entry(const std::string& key) {
  Entry entry;
  entry.key = key;
  entry.kernel = "axpy";
  entry.backend = "cpu";
  entry.kind = "kernel-lib";
  entry.artifact = kArtifact;
  entry.build_seconds = 1.25;
  entry.deps = {"/work/kernels/axpy/axpy_cpu.cpp", "/usr/include/stdio.h"};
  entry.inputs = {{"kernel", "axpy"}, {"flags.cpu", std::string("-O3\0-g", 6)}};
  return entry;
}

const std::string kKey = hash_bytes("key one").hex();

std::string publish_sample(const CacheStore& store, const std::string& bytes = "ELF bytes") {
  store.publish(stage_build(store, bytes), sample_entry(kKey));
  return store.object_dir(kKey) + "/" + kArtifact;
}

// Looking `key` up misses, and the reason names `part`.
void expect_miss_saying(const CacheStore& store, const std::string& key, const std::string& part) {
  const Lookup miss = store.lookup(key);
  EXPECT_FALSE(miss.entry) << key;
  EXPECT_NE(miss.miss_reason.find(part), std::string::npos) << miss.miss_reason;
}

TEST(CacheStore, PublishThenLookupHits) {
  TempDir dir;
  CacheStore store(dir.path() + "/cache");
  const std::string staging = stage_build(store, "ELF bytes");
  const Entry published = store.publish(staging, sample_entry(kKey));
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_EQ(published.dir, store.object_dir(kKey));
  EXPECT_EQ(published.artifact_size, 9);
  EXPECT_EQ(published.artifact_xxh3, hash_bytes("ELF bytes").hex());
  EXPECT_GT(published.built_at, 0);

  const Lookup hit = store.lookup(kKey);
  ASSERT_TRUE(hit.entry) << hit.miss_reason;
  EXPECT_TRUE(hit.miss_reason.empty());
  EXPECT_EQ(hit.entry->kernel, "axpy");
  EXPECT_EQ(hit.entry->artifact_size, 9);
  EXPECT_EQ(hit.entry->build_seconds, 1.25);
  EXPECT_EQ(hit.entry->deps, sample_entry(kKey).deps);
  ASSERT_EQ(hit.entry->inputs.size(), 2u);
  EXPECT_EQ(hit.entry->inputs[0].name, "flags.cpu");
  EXPECT_EQ(hit.entry->inputs[0].value, std::string("-O3\0-g", 6));
  EXPECT_EQ(hit.entry->dir, store.object_dir(kKey));
  EXPECT_EQ(read_text(hit.entry->dir + "/build.log"), "g++ -O3 ...\n");
}

TEST(CacheStore, AbsentKeyIsAPlainMiss) {
  TempDir dir;
  CacheStore store(dir.path());
  const Lookup miss = store.lookup(hash_bytes("nothing").hex());
  EXPECT_FALSE(miss.entry);
  EXPECT_TRUE(miss.miss_reason.empty());
}

TEST(CacheStore, TruncatedArtifactIsAMissAndRemoved) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string artifact = publish_sample(store, std::string(4096, 'x'));
  fs::resize_file(artifact, 120);
  const Lookup miss = store.lookup(kKey);
  EXPECT_FALSE(miss.entry);
  EXPECT_EQ(miss.miss_reason, "artifact " + kArtifact +
                                  " is 120 bytes, entry says 4096: truncated or altered; "
                                  "rebuilding");
  EXPECT_FALSE(fs::exists(store.object_dir(kKey)));
  const Lookup again = store.lookup(kKey);
  EXPECT_FALSE(again.entry);
  EXPECT_TRUE(again.miss_reason.empty());
}

TEST(CacheStore, AlteredByteSameSizeIsAMiss) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string artifact = publish_sample(store, "ELF bytes");
  write_text(artifact, "ELF bytez");
  expect_miss_saying(store, kKey, "XXH3");
  EXPECT_FALSE(fs::exists(store.object_dir(kKey)));
}

TEST(CacheStore, MissingArtifactIsAMiss) {
  TempDir dir;
  CacheStore store(dir.path());
  fs::remove(publish_sample(store));
  expect_miss_saying(store, kKey, "missing");
}

TEST(CacheStore, GarbageEntryIsAMiss) {
  TempDir dir;
  CacheStore store(dir.path());
  publish_sample(store);
  write_text(store.object_dir(kKey) + "/entry.toml", "format = [[[ not toml");
  expect_miss_saying(store, kKey, "entry.toml");
  EXPECT_FALSE(fs::exists(store.object_dir(kKey)));
}

TEST(CacheStore, OtherFormatIsAMiss) {
  TempDir dir;
  CacheStore store(dir.path());
  publish_sample(store);
  const std::string entry_path = store.object_dir(kKey) + "/entry.toml";
  std::string text = read_text(entry_path);
  ASSERT_EQ(text.rfind("format = 1\n", 0), 0u);
  text.replace(0, 10, "format = 2");
  write_text(entry_path, text);
  expect_miss_saying(store, kKey, "format 2");
}

TEST(CacheStore, KeyMismatchIsAMiss) {
  TempDir dir;
  CacheStore store(dir.path());
  publish_sample(store);
  const std::string other = hash_bytes("key two").hex();
  fs::rename(store.object_dir(kKey), store.object_dir(other));
  expect_miss_saying(store, other, "belongs to key");
}

TEST(CacheStore, EntryTomlRoundTrip) {
  Entry entry = sample_entry(kKey);
  entry.artifact_size = 77;
  entry.artifact_xxh3 = hash_bytes("x").hex();
  entry.built_at = 1764500000;
  entry.build_seconds = 0.1;
  const Entry back = entry_from_toml(entry_to_toml(entry));
  EXPECT_EQ(back.key, entry.key);
  EXPECT_EQ(back.kind, entry.kind);
  EXPECT_EQ(back.artifact_size, 77);
  EXPECT_EQ(back.built_at, 1764500000);
  EXPECT_EQ(back.build_seconds, 0.1);
  EXPECT_EQ(back.deps, entry.deps);
  entry.deps.clear();
  EXPECT_TRUE(entry_from_toml(entry_to_toml(entry)).deps.empty());
  EXPECT_THROW(entry_from_toml("format = 1\n"), std::runtime_error);
}

TEST(CacheStore, ConcurrentPublishOfOneKeyKeepsOne) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string staging_a = stage_build(store, "same bytes");
  const std::string staging_b = stage_build(store, "same bytes");
  std::atomic<int> ready{0};
  Entry a, b;
  auto run = [&](const std::string& staging, Entry* out) {
    ++ready;
    while (ready.load() < 2) {
    }
    *out = store.publish(staging, sample_entry(kKey));
  };
  std::thread ta(run, staging_a, &a);
  std::thread tb(run, staging_b, &b);
  ta.join();
  tb.join();
  EXPECT_EQ(a.dir, store.object_dir(kKey));
  EXPECT_EQ(b.dir, store.object_dir(kKey));
  EXPECT_EQ(a.artifact_xxh3, b.artifact_xxh3);
  EXPECT_FALSE(fs::exists(staging_a));
  EXPECT_FALSE(fs::exists(staging_b));
  EXPECT_TRUE(store.lookup(kKey).entry);
  // Nothing left behind in tmp.
  EXPECT_TRUE(fs::is_empty(dir.path() + "/v1/tmp"));
}

// What a remote fetch brings: another cache's entry.toml and artifact bytes.
struct Fetched {
  std::string record, artifact;
};

Fetched built_elsewhere(const CacheStore& theirs, const std::string& bytes) {
  const Entry published = theirs.publish(stage_build(theirs, bytes), sample_entry(kKey));
  return {read_text(published.dir + "/entry.toml"), read_text(published.dir + "/" + kArtifact)};
}

bool staging_is_empty(const CacheStore& store) {
  return fs::is_empty(store.root() + "/v1/tmp");
}

TEST(CacheStore, AdoptPublishesAVerifiedEntryAsItWasBuilt) {
  TempDir dir;
  CacheStore theirs(dir.path() + "/theirs"), ours(dir.path() + "/ours");
  const Fetched fetched = built_elsewhere(theirs, "ELF bytes");
  const Lookup adopted = ours.adopt(kKey, fetched.record, fetched.artifact);
  ASSERT_TRUE(adopted.entry) << adopted.miss_reason;
  EXPECT_EQ(adopted.entry->dir, ours.object_dir(kKey));
  EXPECT_EQ(adopted.entry->build_seconds, 1.25);  // the builder's record, not a new one
  EXPECT_TRUE(staging_is_empty(ours));
  const Lookup hit = ours.lookup(kKey);
  ASSERT_TRUE(hit.entry) << hit.miss_reason;
  EXPECT_EQ(read_text(hit.entry->dir + "/" + kArtifact), "ELF bytes");
  EXPECT_EQ(read_text(hit.entry->dir + "/entry.toml"), fetched.record);
}

TEST(CacheStore, AdoptRejectsAFlippedByteAndLeavesNothing) {
  TempDir dir;
  CacheStore theirs(dir.path() + "/theirs"), ours(dir.path() + "/ours");
  Fetched fetched = built_elsewhere(theirs, "ELF bytes");
  fetched.artifact[4] ^= 0x20;
  const Lookup rejected = ours.adopt(kKey, fetched.record, fetched.artifact);
  EXPECT_FALSE(rejected.entry);
  EXPECT_EQ(rejected.miss_reason,
            "artifact " + kArtifact + " does not match the XXH3 digest in entry.toml: altered");
  EXPECT_FALSE(fs::exists(ours.object_dir(kKey)));
  EXPECT_TRUE(staging_is_empty(ours));
}

TEST(CacheStore, AdoptRejectsTruncationGarbageAndAnotherKeysRecord) {
  TempDir dir;
  CacheStore theirs(dir.path() + "/theirs"), ours(dir.path() + "/ours");
  const Fetched fetched = built_elsewhere(theirs, std::string(4096, 'x'));
  EXPECT_NE(ours.adopt(kKey, fetched.record, fetched.artifact.substr(0, 100)).miss_reason.find("truncated"),
            std::string::npos);
  EXPECT_NE(ours.adopt(kKey, fetched.record.substr(0, 40), fetched.artifact).miss_reason.find("unusable"),
            std::string::npos);
  const std::string other = hash_bytes("key two").hex();
  EXPECT_NE(ours.adopt(other, fetched.record, fetched.artifact).miss_reason.find("belongs to key " + kKey),
            std::string::npos);
  std::string escaping = fetched.record;
  escaping.replace(escaping.find(kArtifact), kArtifact.size(), "../../evil.so");
  EXPECT_NE(ours.adopt(kKey, escaping, fetched.artifact).miss_reason.find("invalid artifact"),
            std::string::npos);
  EXPECT_THROW(ours.adopt("../escape", fetched.record, fetched.artifact), std::invalid_argument);
  EXPECT_FALSE(fs::exists(ours.object_dir(kKey)));
  EXPECT_FALSE(fs::exists(ours.object_dir(other)));
  EXPECT_TRUE(staging_is_empty(ours));
}

TEST(CacheStore, AdoptKeepsAnEntryAlreadyPublished) {
  TempDir dir;
  CacheStore theirs(dir.path() + "/theirs"), ours(dir.path() + "/ours");
  publish_sample(ours, "local build");
  const Fetched fetched = built_elsewhere(theirs, "remote build");
  const Lookup adopted = ours.adopt(kKey, fetched.record, fetched.artifact);
  ASSERT_TRUE(adopted.entry) << adopted.miss_reason;
  EXPECT_EQ(read_text(adopted.entry->dir + "/" + kArtifact), "local build");
  EXPECT_TRUE(staging_is_empty(ours));
}

TEST(CacheStore, PublishWithoutArtifactThrows) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string staging = store.make_staging_dir();
  EXPECT_THROW(store.publish(staging, sample_entry(kKey)), std::runtime_error);
  EXPECT_FALSE(fs::exists(store.object_dir(kKey)));
}

TEST(CacheStore, ListTouchAndRemove) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string key2 = hash_bytes("key two").hex();
  Entry second = sample_entry(key2);
  second.built_at = 1000;
  store.publish(stage_build(store, "ELF bytes"), sample_entry(kKey));
  store.publish(stage_build(store, "other"), second);
  // A broken folder is skipped silently.
  fs::create_directory(store.object_dir(hash_bytes("broken").hex()));

  std::vector<Entry> entries = store.list();
  ASSERT_EQ(entries.size(), 2u);
  for (const Entry& e : entries) {
    EXPECT_EQ(e.dir, store.object_dir(e.key));
    EXPECT_EQ(e.disk_bytes, static_cast<int64_t>(fs::file_size(e.dir + "/" + kArtifact) +
                                                 fs::file_size(e.dir + "/build.log") +
                                                 fs::file_size(e.dir + "/entry.toml")));
    if (e.key == key2) {
      EXPECT_EQ(e.last_used, 1000);  // never used: built_at
    }
  }
  store.touch(key2);
  for (const Entry& e : store.list()) {
    if (e.key == key2) {
      EXPECT_GT(e.last_used, 1000);
    }
  }

  store.remove(kKey);
  EXPECT_FALSE(fs::exists(store.object_dir(kKey)));
  entries = store.list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].key, key2);
  store.remove(kKey);  // already gone: fine
  store.touch(kKey);   // nothing to mark: fine
  EXPECT_FALSE(fs::exists(store.object_dir(kKey)));
}

TEST(CacheStore, FoldersArePrivate) {
  TempDir dir;
  const std::string root = dir.path() + "/deep/cache";
  CacheStore store(root);
  for (const std::string& sub :
       {root, root + "/v1", root + "/v1/objects", root + "/v1/tmp", root + "/v1/locks",
        root + "/v1/memo", store.make_staging_dir()}) {
    struct stat st;
    ASSERT_EQ(stat(sub.c_str(), &st), 0) << sub;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << sub;
  }
  EXPECT_EQ(store.lock_path(kKey), root + "/v1/locks/" + kKey + ".lock");
  EXPECT_EQ(store.memo_path("axpy.cpu"), root + "/v1/memo/axpy.cpu.toml");
  EXPECT_THROW(store.object_dir("../escape"), std::invalid_argument);
  CacheStore again(root);  // existing layout is fine
}

TEST(CacheStore, StagingNameStartsWithPid) {
  TempDir dir;
  CacheStore store(dir.path());
  const std::string staging = store.make_staging_dir();
  const std::string name = fs::path(staging).filename().string();
  EXPECT_EQ(name.rfind(std::to_string(getpid()) + "-", 0), 0u) << name;
  EXPECT_NE(staging, store.make_staging_dir());
}

TEST(CacheStore, CleanStagingRemovesDeadProcessesFolders) {
  TempDir dir;
  CacheStore store(dir.path());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: the pid is now unused

  const std::string tmp = dir.path() + "/v1/tmp/";
  fs::create_directories(tmp + std::to_string(child) + "-deadbeef/sub");
  write_text(tmp + std::to_string(child) + "-deadbeef/sub/x.o", "obj");
  const std::string mine = store.make_staging_dir();
  fs::create_directory(tmp + "not-a-pid");
  fs::create_directory(tmp + "1-init-is-alive");

  EXPECT_EQ(store.clean_staging(), 1);
  EXPECT_FALSE(fs::exists(tmp + std::to_string(child) + "-deadbeef"));
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(tmp + "not-a-pid"));
  EXPECT_TRUE(fs::exists(tmp + "1-init-is-alive"));
}

// ---- pins and eviction ------------------------------------------------------

// Publishes `key` with an artifact of `size` bytes, last used at `used_at`.
void publish_used_at(const CacheStore& store, const std::string& key, size_t size,
                     time_t used_at) {
  store.publish(stage_build(store, std::string(size, 'x')), sample_entry(key));
  store.touch(key);
  const std::string used = store.object_dir(key) + "/used";
  const struct timeval times[2] = {{used_at, 0}, {used_at, 0}};
  ASSERT_EQ(utimes(used.c_str(), times), 0) << used;
}

std::string key_named(const std::string& name) { return hash_bytes(name).hex(); }

// Each eviction test starts from an empty store of its own.
class CacheStoreGc : public ::testing::Test {
 protected:
  TempDir dir;
  CacheStore store{dir.path()};
};

TEST_F(CacheStoreGc, UnderTheCapRemovesNothing) {
  publish_used_at(store, key_named("a"), 1000, 100);
  const GcReport report = store.gc(1 << 20);
  EXPECT_TRUE(report.removed.empty());
  EXPECT_EQ(report.freed_bytes, 0);
  EXPECT_GT(report.total_bytes, 1000);
  EXPECT_TRUE(store.lookup(key_named("a")).entry);
}

TEST_F(CacheStoreGc, RemovesLeastRecentlyUsedFirst) {
  // Published in an order different from their use, so publishing order
  // cannot pass for LRU order.
  publish_used_at(store, key_named("middle"), 1000, 2000);
  publish_used_at(store, key_named("newest"), 1000, 3000);
  publish_used_at(store, key_named("oldest"), 1000, 1000);
  int64_t total = 0;
  for (const Entry& e : store.list()) total += e.disk_bytes;

  // Room for two entries but not three: only the oldest goes.
  GcReport report = store.gc(total - 500);
  ASSERT_EQ(report.removed, std::vector<std::string>{key_named("oldest")});
  EXPECT_GE(report.freed_bytes, 1000);
  EXPECT_EQ(report.total_bytes, total - report.freed_bytes);
  EXPECT_EQ(report.kept_live, 0);
  EXPECT_FALSE(fs::exists(store.object_dir(key_named("oldest"))));

  // Using the middle one makes it the newest: a cap for one entry keeps it.
  store.touch(key_named("middle"));
  report = store.gc(report.total_bytes / 2 + 100);
  ASSERT_EQ(report.removed, std::vector<std::string>{key_named("newest")});
  EXPECT_TRUE(store.lookup(key_named("middle")).entry);
  EXPECT_TRUE(fs::is_empty(dir.path() + "/v1/tmp"));  // removed folders do not linger
}

TEST_F(CacheStoreGc, PinnedEntryIsKeptEvenWhenOldest) {
  publish_used_at(store, key_named("oldest"), 1000, 1000);
  publish_used_at(store, key_named("newer"), 1000, 2000);
  Pin pin = store.pin(key_named("oldest"));
  EXPECT_TRUE(pin.held());
  EXPECT_EQ(pin.key(), key_named("oldest"));
  EXPECT_TRUE(store.pinned(key_named("oldest")));
  EXPECT_FALSE(store.pinned(key_named("newer")));

  GcReport report = store.gc(0);
  EXPECT_EQ(report.removed, std::vector<std::string>{key_named("newer")});
  EXPECT_EQ(report.kept_live, 1);
  EXPECT_TRUE(store.lookup(key_named("oldest")).entry);

  pin.release();
  EXPECT_FALSE(pin.held());
  EXPECT_FALSE(store.pinned(key_named("oldest")));
  report = store.gc(0);
  EXPECT_EQ(report.removed, std::vector<std::string>{key_named("oldest")});
  EXPECT_EQ(report.total_bytes, 0);
}

TEST_F(CacheStoreGc, KeepListIsNotRemoved) {
  publish_used_at(store, key_named("just built"), 1000, 1000);
  const GcReport report = store.gc(0, {key_named("just built")});
  EXPECT_TRUE(report.removed.empty());
  EXPECT_EQ(report.kept_live, 0);
  EXPECT_TRUE(store.lookup(key_named("just built")).entry);
}

TEST_F(CacheStoreGc, PinHeldByAForkedChildLastsUntilItExits) {
  publish_used_at(store, key_named("child's"), 1000, 1000);
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child pins, says so, and holds the pin until told to exit. It
    // exits without releasing: the kernel must drop the lock for it.
    Pin pin = store.pin(key_named("child's"));
    char byte = 'p';
    if (write(to_parent[1], &byte, 1) != 1) _exit(2);
    if (read(to_child[0], &byte, 1) != 1) _exit(3);
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(to_parent[0], &byte, 1), 1);

  GcReport report = store.gc(0);
  EXPECT_TRUE(report.removed.empty());
  EXPECT_EQ(report.kept_live, 1);
  EXPECT_TRUE(store.pinned(key_named("child's")));

  ASSERT_EQ(write(to_child[1], &byte, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);

  report = store.gc(0);
  EXPECT_EQ(report.removed, std::vector<std::string>{key_named("child's")});
  EXPECT_EQ(report.kept_live, 0);
}

TEST_F(CacheStoreGc, ClearRemovesAllButPinnedAndBrokenFoldersToo) {
  publish_used_at(store, key_named("a"), 100, 1000);
  publish_used_at(store, key_named("b"), 100, 2000);
  publish_used_at(store, key_named("pinned"), 100, 3000);
  // A folder that list() skips still takes space, so clear() removes it.
  fs::create_directory(store.object_dir(key_named("broken")));
  write_text(store.object_dir(key_named("broken")) + "/entry.toml", "not toml [[[");
  const Pin pin = store.pin(key_named("pinned"));

  const GcReport report = store.clear();
  EXPECT_EQ(report.removed.size(), 3u);
  EXPECT_EQ(report.kept_live, 1);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path() + "/v1/objects")) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{key_named("pinned")});
  EXPECT_THROW(store.gc(-1), std::invalid_argument);
}

TEST_F(CacheStoreGc, PinOfAMissingEntryThrowsAndSaysWhatToDo) {
  try {
    store.pin(key_named("never published"));
    FAIL() << "pin() of a missing entry returned";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("call get() again"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(store.object_dir(key_named("never published"))));
}

TEST_F(CacheStoreGc, PinWaitingOnARemovalRefusesInsteadOfPinningNothing) {
  publish_used_at(store, key_named("a"), 100, 1000);
  // Play gc: hold the exclusive lock, let pin() block on it, remove the
  // entry, then let go. The pin must notice its file is no longer the entry's.
  const std::string used = store.object_dir(key_named("a")) + "/used";
  const int fd = open(used.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  std::atomic<bool> refused{false};
  std::string message;
  std::thread pinner([&] {
    try {
      store.pin(key_named("a"));
    } catch (const std::runtime_error& e) {
      message = e.what();
      refused = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  store.remove(key_named("a"));
  close(fd);
  pinner.join();
  EXPECT_TRUE(refused);
  EXPECT_NE(message.find("concurrent gc"), std::string::npos) << message;
}

TEST_F(CacheStoreGc, PinMovesAndSecondPinInOneProcessIsFine) {
  publish_used_at(store, key_named("a"), 100, 1000);
  Pin first = store.pin(key_named("a"));
  Pin second = store.pin(key_named("a"));  // shared locks do not conflict
  Pin moved = std::move(first);
  EXPECT_FALSE(first.held());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(moved.held());
  second.release();
  EXPECT_TRUE(store.pinned(key_named("a")));  // `moved` still holds it
  moved = Pin();
  EXPECT_FALSE(store.pinned(key_named("a")));
}

}  // namespace
}  // namespace kreg
