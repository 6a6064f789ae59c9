#include "dep_record.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kreg {
namespace {

using test_support::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A far-future build start: every file predates it.
constexpr int64_t kLater = INT64_MAX;

// One checkout of a kernel: its folder, a scanned source and a header that
// only the compiler sees (an include spelled through a macro).
struct Checkout {
  explicit Checkout(const std::string& root)
      : dir(root + "/axpy"),
        include(root + "/include"),
        labels({{"", dir}, {"registry/include/", include}}) {
    write_text(dir + "/axpy.cpp", "#define H \"val.h\"\n#include H\n");
    write_text(dir + "/val.h", "#define VAL 0\n");
    write_text(include + "/kreg/abi.h", "// abi\n");
  }
  Key base() const {
    KeyBuilder builder;
    builder.add("kernel", "axpy").add_file("axpy.cpp", dir + "/axpy.cpp");
    return builder.finish();
  }
  std::vector<std::string> reported() const {
    return {dir + "/axpy.cpp", dir + "/val.h", include + "/kreg/abi.h"};
  }
  std::string dir;
  std::string include;
  DepLabels labels;
};

TEST(DepRecord, RoundTrip) {
  DepRecord record;
  record.base = hash_bytes("base").hex();
  record.entries.push_back(
      {hash_bytes("k1").hex(), {{"a \"q\".h", hash_bytes("a")}, {"b.h", hash_bytes("b")}}});
  record.entries.push_back({hash_bytes("k2").hex(), {}});
  DepRecord back = dep_record_from_toml(dep_record_to_toml(record));
  EXPECT_EQ(back.base, record.base);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[0].key, record.entries[0].key);
  ASSERT_EQ(back.entries[0].files.size(), 2u);
  EXPECT_EQ(back.entries[0].files[0].label, "a \"q\".h");
  EXPECT_EQ(back.entries[0].files[0].content, hash_bytes("a"));
  EXPECT_TRUE(back.entries[1].files.empty());
}

TEST(DepRecord, GarbageOrAnotherFormatReadsAsNothing) {
  TempDir tmp;
  const std::string path = tmp.path() + "/r.toml";
  EXPECT_FALSE(read_dep_record(path));
  write_text(path, "format = 2\nbase = \"x\"\n");
  EXPECT_FALSE(read_dep_record(path));
  write_text(path, "\xff\xfe not toml [[[");
  EXPECT_FALSE(read_dep_record(path));
  write_text(path, "format = 1\nbase = \"b\"\n[[entry]]\nkey = \"nothex\"\nfiles = {}\n");
  EXPECT_FALSE(read_dep_record(path));
}

TEST(DepLabels, LabelsAreRelativeToTheirRootAndMapBack) {
  TempDir tmp;
  Checkout c(tmp.path());
  EXPECT_EQ(c.labels.label(c.dir + "/val.h"), "val.h");
  EXPECT_EQ(c.labels.label(c.include + "/kreg/abi.h"), "registry/include/kreg/abi.h");
  EXPECT_FALSE(c.labels.label("/usr/include/stdio.h"));
  EXPECT_EQ(c.labels.path("val.h"), c.dir + "/val.h");
  EXPECT_EQ(c.labels.path("registry/include/kreg/abi.h"), c.include + "/kreg/abi.h");
  EXPECT_FALSE(c.labels.path("../escape.h"));
  EXPECT_FALSE(c.labels.path("/etc/passwd"));
  EXPECT_FALSE(c.labels.path("a/../../b.h"));
}

TEST(DepLabels, SymlinkedRootsGiveTheSameLabel) {
  TempDir tmp;
  Checkout c(tmp.path());
  std::filesystem::create_directory_symlink(c.dir, tmp.path() + "/link");
  DepLabels through_link({{"", tmp.path() + "/link"}});
  EXPECT_EQ(through_link.label(c.dir + "/val.h"), "val.h");
  EXPECT_EQ(c.labels.label(tmp.path() + "/link/val.h"), "val.h");
}

TEST(KeyWithFiles, NoFilesIsTheBaseKeyAndFilesChangeIt) {
  TempDir tmp;
  Checkout c(tmp.path());
  const Key base = c.base();
  EXPECT_EQ(key_with_files(base, {}).digest, base.digest);
  const Key one = key_with_files(base, {{"val.h", hash_bytes("0")}});
  const Key other = key_with_files(base, {{"val.h", hash_bytes("1")}});
  EXPECT_NE(one.digest, base.digest);
  EXPECT_NE(one.digest, other.digest);
  EXPECT_EQ(diff_key_inputs(one.inputs, other.inputs), std::vector<std::string>{"file:val.h changed"});
}

TEST(DepsFromBuild, ExtraFilesAreTheReportedOnesBeyondTheScan) {
  TempDir tmp;
  Checkout c(tmp.path());
  const Key base = c.base();
  BuildDeps deps = deps_from_build(base, c.labels, c.reported(), {c.dir + "/axpy.cpp"}, kLater);
  ASSERT_TRUE(deps.entry);
  ASSERT_EQ(deps.entry->files.size(), 2u);
  EXPECT_EQ(deps.entry->files[0].label, "registry/include/kreg/abi.h");
  EXPECT_EQ(deps.entry->files[1].label, "val.h");
  EXPECT_EQ(deps.entry->key, deps.key.digest.hex());
  EXPECT_EQ(deps.stamps.size(), 2u);
  // Files outside every root are left to the toolchain inputs.
  BuildDeps outside = deps_from_build(base, c.labels, {"/usr/include/stdio.h"}, {}, kLater);
  ASSERT_TRUE(outside.entry);
  EXPECT_TRUE(outside.entry->files.empty());
  EXPECT_EQ(outside.key.digest, base.digest);
}

TEST(DepsFromBuild, AFileSavedDuringTheBuildIsNeverRecorded) {
  TempDir tmp;
  Checkout c(tmp.path());
  const int64_t started = now_ns();
  usleep(20000);  // file times come from a coarse clock
  write_text(c.dir + "/val.h", "#define VAL 1\n");
  BuildDeps first = deps_from_build(c.base(), c.labels, c.reported(), {}, started);
  BuildDeps second = deps_from_build(c.base(), c.labels, c.reported(), {}, started);
  EXPECT_FALSE(first.entry);
  EXPECT_NE(first.key.digest, second.key.digest);  // unique: nobody reuses it
  std::vector<FileStamp> stamps = first.stamps;
  EXPECT_FALSE(stamps_unchanged(stamps));
}

TEST(MatchDepRecord, TwoCheckoutsShareEntriesAndEachGetsItsOwnContent) {
  TempDir tmp;
  Checkout a(tmp.path() + "/a");
  Checkout b(tmp.path() + "/b");
  const std::string record = tmp.path() + "/deps.toml";
  const Key base = a.base();
  ASSERT_EQ(base.digest, b.base().digest);  // labels, not paths, are keyed
  EXPECT_FALSE(match_dep_record(record, base, a.labels));

  const std::vector<std::string> scanned = {a.dir + "/axpy.cpp"};
  BuildDeps v0 = deps_from_build(base, a.labels, a.reported(), scanned, kLater);
  add_dep_entry(record, base, *v0.entry);
  write_text(a.dir + "/val.h", "#define VAL 5\n");
  BuildDeps v5 = deps_from_build(base, a.labels, a.reported(), scanned, kLater);
  add_dep_entry(record, base, *v5.entry);
  EXPECT_NE(v0.key.digest, v5.key.digest);
  ASSERT_EQ(read_dep_record(record)->entries.size(), 2u);

  // Checkout b still holds VAL 0: it finds the first build, from its own files.
  std::optional<DepMatch> in_b = match_dep_record(record, base, b.labels);
  ASSERT_TRUE(in_b);
  EXPECT_EQ(in_b->key.digest, v0.key.digest);
  ASSERT_EQ(in_b->stamps.size(), 2u);
  EXPECT_EQ(in_b->stamps[1].path, b.dir + "/val.h");
  // With the same edit, it finds the second.
  write_text(b.dir + "/val.h", "#define VAL 5\n");
  in_b = match_dep_record(record, base, b.labels);
  ASSERT_TRUE(in_b);
  EXPECT_EQ(in_b->key.digest, v5.key.digest);
  // Content no build has seen: no match.
  write_text(b.dir + "/val.h", "#define VAL 7\n");
  EXPECT_FALSE(match_dep_record(record, base, b.labels));
  // A removed file matches nothing either.
  std::filesystem::remove(b.dir + "/val.h");
  EXPECT_FALSE(match_dep_record(record, base, b.labels));
}

TEST(MatchDepRecord, ARecordOfAnotherBaseOrATamperedKeyIsIgnored) {
  TempDir tmp;
  Checkout c(tmp.path());
  const std::string record = tmp.path() + "/deps.toml";
  const Key base = c.base();
  BuildDeps deps = deps_from_build(base, c.labels, c.reported(), {}, kLater);
  add_dep_entry(record, base, *deps.entry);
  const Key other = KeyBuilder().add("kernel", "other").finish();
  EXPECT_FALSE(match_dep_record(record, other, c.labels));
  DepEntry tampered = *deps.entry;
  tampered.key = hash_bytes("elsewhere").hex();
  DepRecord r{base.digest.hex(), {tampered}};
  write_text(record, dep_record_to_toml(r));
  EXPECT_FALSE(match_dep_record(record, base, c.labels));
}

TEST(AddDepEntry, NewestFirstNoDuplicatesBounded) {
  TempDir tmp;
  const std::string record = tmp.path() + "/deps.toml";
  const Key base = KeyBuilder().add("kernel", "k").finish();
  for (size_t i = 0; i < kDepRecordMaxEntries + 3; ++i) {
    add_dep_entry(record, base, {hash_bytes(std::to_string(i)).hex(), {}});
  }
  add_dep_entry(record, base, {hash_bytes("5").hex(), {}});
  std::optional<DepRecord> back = read_dep_record(record);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->entries.size(), kDepRecordMaxEntries);
  EXPECT_EQ(back->entries[0].key, hash_bytes("5").hex());
  EXPECT_EQ(back->entries[1].key, hash_bytes(std::to_string(kDepRecordMaxEntries + 2)).hex());
  for (size_t i = 1; i < back->entries.size(); ++i) EXPECT_NE(back->entries[i].key, back->entries[0].key);
  // A record left by another base is replaced, not merged.
  const Key other = KeyBuilder().add("kernel", "other").finish();
  add_dep_entry(record, other, {hash_bytes("x").hex(), {}});
  back = read_dep_record(record);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->entries.size(), 1u);
}

}  // namespace
}  // namespace kreg
