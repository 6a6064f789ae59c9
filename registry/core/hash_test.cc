#include "hash.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace kreg {
namespace {

using test_support::TempDir;

// Pinned once from XXH3-128; if these change, every cache key on every
// machine changes with them.
TEST(HashTest, KnownValuesAreStable) {
  EXPECT_EQ(hash_bytes("").hex(), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(hash_bytes("abc").hex(), "06b05ab6733a618578af5f94892f3950");
}

TEST(HashTest, DifferentBytesDiffer) {
  EXPECT_NE(hash_bytes("abc"), hash_bytes("abd"));
  EXPECT_EQ(hash_bytes("abc"), hash_bytes(std::string("abc")));
}

TEST(HashTest, EmbeddedNulIsHashed) {
  EXPECT_NE(hash_bytes(std::string("a\0b", 3)), hash_bytes("a"));
}

TEST(HashTest, HexIsHighWordFirstLowercase) {
  Digest d{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(d.hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(Digest{}.hex(), std::string(32, '0'));
}

TEST(HashTest, HexRoundTrip) {
  for (const char* text : {"", "abc", "kernel.toml"}) {
    Digest d = hash_bytes(text);
    std::optional<Digest> back = Digest::from_hex(d.hex());
    ASSERT_TRUE(back.has_value()) << text;
    EXPECT_EQ(*back, d);
  }
  Digest edge{~0ULL, 0};
  EXPECT_EQ(Digest::from_hex(edge.hex()), edge);
}

TEST(HashTest, FromHexRejectsBadInput) {
  const std::string good = hash_bytes("abc").hex();
  EXPECT_FALSE(Digest::from_hex(""));
  EXPECT_FALSE(Digest::from_hex(good.substr(1)));                   // too short
  EXPECT_FALSE(Digest::from_hex(good + "0"));                       // too long
  EXPECT_FALSE(Digest::from_hex("06B05AB6733A618578AF5F94892F3950"));  // uppercase
  EXPECT_FALSE(Digest::from_hex("g6b05ab6733a618578af5f94892f3950"));  // not hex
  EXPECT_FALSE(Digest::from_hex(" 6b05ab6733a618578af5f94892f3950"));  // space
  EXPECT_FALSE(Digest::from_hex("+6b05ab6733a618578af5f94892f3950"));  // sign
  EXPECT_FALSE(Digest::from_hex("0x6b05ab6733a618578af5f94892f395"));  // prefix
  std::string with_nul = good;
  with_nul[5] = '\0';
  EXPECT_FALSE(Digest::from_hex(with_nul));
}

TEST(HashTest, FileMatchesBytes) {
  TempDir dir;
  const std::string bytes("binary\0\r\n\xff data", 15);
  std::optional<Digest> d = hash_file(dir.write("f", bytes));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, hash_bytes(bytes));
}

// Read in 64 KiB pieces: the digest must not depend on where they end.
TEST(HashTest, LargeFileMatchesBytesAcrossReads) {
  TempDir dir;
  std::string bytes(3 * 65536 + 12345, '\0');
  uint32_t x = 2463534242u;
  for (char& c : bytes) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  std::optional<Digest> d = hash_file(dir.write("f", bytes));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, hash_bytes(bytes));
}

TEST(HashTest, UnreadableFileIsNullopt) {
  EXPECT_FALSE(hash_file("/nonexistent/kreg/file"));
  EXPECT_FALSE(hash_file("/tmp"));  // a directory opens but cannot be read
}

TEST(HashTest, FieldHasherIsDeterministic) {
  FieldHasher a, b;
  a.field("kernel", "axpy").field("backend", "cuda");
  b.field("kernel", "axpy").field("backend", "cuda");
  EXPECT_EQ(a.digest(), b.digest());
  // digest() does not consume the state.
  EXPECT_EQ(a.digest(), a.digest());
}

TEST(HashTest, FieldHasherDelimitsValues) {
  FieldHasher a, b;
  a.field("a", "bc");
  b.field("ab", "c");
  EXPECT_NE(a.digest(), b.digest());
}

TEST(HashTest, FieldHasherDelimitsFields) {
  FieldHasher two, one;
  two.field("flags", "-I").field("flags", "-O2");
  one.field("flags", "-I-O2");
  EXPECT_NE(two.digest(), one.digest());
}

TEST(HashTest, FieldHasherOrderMatters) {
  FieldHasher a, b;
  a.field("x", "1").field("y", "2");
  b.field("y", "2").field("x", "1");
  EXPECT_NE(a.digest(), b.digest());
}

TEST(HashTest, FieldHasherMatchesRecordFormat) {
  // The documented record, hashed in one go, must equal the streamed digest.
  FieldHasher h;
  h.field("name", "value").field("", "");
  const std::string records = std::string("name\0" "5\0" "value", 12) + std::string("\0" "0\0", 3);
  EXPECT_EQ(h.digest(), hash_bytes(records));
}

TEST(HashTest, EmptyFieldHasherIsHashOfNothing) {
  EXPECT_EQ(FieldHasher().digest(), hash_bytes(""));
}

}  // namespace
}  // namespace kreg
