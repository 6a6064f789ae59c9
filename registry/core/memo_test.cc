#include "memo.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kreg {
namespace {

using test_support::TempDir;

Memo sample_memo() {
  Memo memo;
  memo.kernel = "axpy";
  memo.backend = "cuda";
  memo.env = hash_bytes("env").hex();
  memo.keys = {{"lib", hash_bytes("lib").hex()}, {"binding", hash_bytes("binding").hex()}};
  FileStamp a{"/work/kernels/axpy/axpy.cu", {1234, 1764500000123456789LL, 42}, hash_bytes("a"),
              1764500001000000000LL};
  // Quotes, backslashes, a tab and a huge inode must survive the round trip.
  FileStamp b{"/work/kernels/a \"quoted\"\\dir/\tb.h", {0, -5, 0xFFFFFFFFFFFFFFF0ULL},
              hash_bytes("b")};
  memo.stamps = {a, b};
  memo.inputs = {{"file:axpy.cu", hash_bytes("a").hex()},
                 {"flags.cuda", std::string("-O3\0-lineinfo", 13)},
                 {"kernel", "axpy"}};
  return memo;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(Memo, RoundTrip) {
  TempDir dir;
  const std::string path = dir.path() + "/axpy.cuda.toml";
  const Memo memo = sample_memo();
  write_memo(path, memo);
  std::optional<Memo> back = read_memo(path);
  ASSERT_TRUE(back) << memo_to_toml(memo);
  EXPECT_EQ(back->kernel, memo.kernel);
  EXPECT_EQ(back->backend, memo.backend);
  EXPECT_EQ(back->env, memo.env);
  EXPECT_EQ(back->keys, memo.keys);
  ASSERT_EQ(back->stamps.size(), memo.stamps.size());
  for (size_t i = 0; i < memo.stamps.size(); ++i) {
    EXPECT_EQ(back->stamps[i].path, memo.stamps[i].path);
    EXPECT_TRUE(back->stamps[i].stat == memo.stamps[i].stat);
    EXPECT_EQ(back->stamps[i].content, memo.stamps[i].content);
    EXPECT_EQ(back->stamps[i].recorded_ns, memo.stamps[i].recorded_ns);
  }
  ASSERT_EQ(back->inputs.size(), memo.inputs.size());
  for (size_t i = 0; i < memo.inputs.size(); ++i) {
    EXPECT_EQ(back->inputs[i].name, memo.inputs[i].name);
    EXPECT_EQ(back->inputs[i].value, memo.inputs[i].value);
  }
}

TEST(Memo, EmptyMemoRoundTrips) {
  TempDir dir;
  const std::string path = dir.path() + "/empty.toml";
  Memo memo;
  write_memo(path, memo);
  std::optional<Memo> back = read_memo(path);
  ASSERT_TRUE(back) << memo_to_toml(memo);
  EXPECT_TRUE(back->keys.empty());
  EXPECT_TRUE(back->stamps.empty());
  EXPECT_TRUE(back->inputs.empty());
}

TEST(Memo, InvalidUtf8StaysReadable) {
  // TOML has no byte escapes: a stray byte becomes U+FFFD instead of making
  // the whole file unreadable.
  TempDir dir;
  const std::string path = dir.path() + "/latin1.toml";
  Memo memo = sample_memo();
  memo.stamps[0].path = "/k/caf\xe9.h";
  memo.inputs = {{"kernel", "ok \xc3\xa9 \xed\xa0\x80"}};  // valid é, then a surrogate
  write_memo(path, memo);
  std::optional<Memo> back = read_memo(path);
  ASSERT_TRUE(back) << memo_to_toml(memo);
  EXPECT_EQ(back->stamps[0].path, "/k/caf\xef\xbf\xbd.h");
  EXPECT_EQ(back->inputs[0].value, "ok \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Memo, MissingOrGarbageIsNullopt) {
  TempDir dir;
  EXPECT_FALSE(read_memo(dir.path() + "/missing.toml"));
  EXPECT_FALSE(read_memo(dir.path()));  // a folder
  const std::string path = dir.path() + "/garbage.toml";
  write_text(path, "this is [not toml\n\x01\xff");
  EXPECT_FALSE(read_memo(path));
  write_text(path, "format = 1\nkernel = 3\n");  // wrong types, missing fields
  EXPECT_FALSE(read_memo(path));
  std::string truncated = memo_to_toml(sample_memo());
  truncated.resize(truncated.size() / 2);
  write_text(path, truncated);
  EXPECT_FALSE(read_memo(path));
}

TEST(Memo, OtherFormatIsNullopt) {
  TempDir dir;
  const std::string path = dir.path() + "/axpy.cpu.toml";
  std::string text = memo_to_toml(sample_memo());
  ASSERT_EQ(text.rfind("format = 3\n", 0), 0u);
  text.replace(0, 10, "format = 2");  // format 2 had no recording times: read as no memo
  write_text(path, text);
  EXPECT_FALSE(read_memo(path));
  text.replace(0, 10, "format = 1");  // format 1 had no counts: read as no memo
  write_text(path, text);
  EXPECT_FALSE(read_memo(path));
}

// Written without fsync, a memo can come back cut short after a crash. Cut
// where a [[stamp]] table begins it is still valid TOML; read, it would vouch
// for the key while checking fewer files. The counts make it unreadable.
TEST(Memo, CutShortAtATableBoundaryIsNullopt) {
  TempDir dir;
  const std::string path = dir.path() + "/axpy.cuda.toml";
  const std::string text = memo_to_toml(sample_memo());
  const size_t second_stamp = text.find("\n[[stamp]]", text.find("[[stamp]]") + 1);
  const size_t inputs = text.find("\n[inputs]");
  ASSERT_NE(second_stamp, std::string::npos);
  ASSERT_NE(inputs, std::string::npos);
  for (size_t cut : {second_stamp + 1, inputs + 1}) {
    write_text(path, text.substr(0, cut));
    EXPECT_FALSE(read_memo(path)) << "cut at " << cut << ":\n" << text.substr(0, cut);
  }
  // The last [inputs] line dropped: fewer inputs than counted.
  write_text(path, text.substr(0, text.rfind('\n', text.size() - 2) + 1));
  EXPECT_FALSE(read_memo(path));
  write_text(path, text);
  EXPECT_TRUE(read_memo(path));
}

}  // namespace
}  // namespace kreg
