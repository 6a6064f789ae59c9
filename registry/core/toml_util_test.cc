#include "toml_util.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kreg {
namespace {

toml::table table_of(const std::string& text) {
  toml::table table;
  if (std::optional<TomlProblem> problem = parse_toml_guarded(text, "test.toml", &table)) {
    ADD_FAILURE() << "bad TOML in the test: " << problem->message;
  }
  return table;
}

// The field and message of the TomlFieldError `read` throws.
template <typename Read>
std::pair<std::string, std::string> error_of(Read read) {
  try {
    read();
  } catch (const TomlFieldError& e) {
    return {e.field(), e.what()};
  }
  return {"(no error)", ""};
}

std::pair<std::string, std::string> field_error(const char* field, const char* message) {
  return {field, message};
}

TEST(TomlFieldTest, FieldPaths) {
  EXPECT_EQ(in_quotes("x"), "\"x\"");
  EXPECT_EQ(dotted("cuda", "sources"), "cuda.sources");
  EXPECT_EQ(dotted("", "name"), "name");  // the root's keys
  EXPECT_EQ(indexed("op", 2), "op[2]");
  EXPECT_EQ(dotted(indexed("op", 0), "dtypes"), "op[0].dtypes");
}

TEST(TomlFieldTest, ReadString) {
  const toml::table t = table_of("s = \"text\"\nn = 3\nz = \"a\\u0000b\"\n");
  EXPECT_EQ(read_string(*t.get("s"), "s"), "text");
  EXPECT_EQ(error_of([&] { read_string(*t.get("n"), "top.n"); }),
            field_error("top.n", "expected a string, got an integer"));
  // A NUL is an error, not text cut short later.
  EXPECT_EQ(error_of([&] { read_string(*t.get("z"), "z"); }), field_error("z", "contains a NUL character"));
}

TEST(TomlFieldTest, ReadStringListNamesTheItem) {
  const toml::table t = table_of("a = [\"x\", \"y\"]\nb = [\"x\", 2]\nc = \"x\"\ne = []\n");
  EXPECT_EQ(read_string_list(*t.get("a"), "a"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(read_string_list(*t.get("e"), "e").empty());
  EXPECT_EQ(error_of([&] { read_string_list(*t.get("b"), "cuda.sources"); }),
            field_error("cuda.sources[1]", "expected a string, got an integer"));
  EXPECT_EQ(error_of([&] { read_string_list(*t.get("c"), "c"); }),
            field_error("c", "expected an array of strings, got a string"));
}

TEST(TomlFieldTest, ReadTable) {
  const toml::table t = table_of("[cpu]\nsources = []\n[[op]]\nx = 1\n");
  EXPECT_NE(read_table(*t.get("cpu"), "cpu").get("sources"), nullptr);
  EXPECT_EQ(error_of([&] { read_table(*t.get("op"), "op"); }), field_error("op", "expected a table, got an array"));
}

TEST(TomlFieldTest, UnknownKeysAreSuggestedOrListed) {
  const std::vector<std::string> allowed = {"sources", "cflags", "compiler"};
  const std::map<std::string, std::string> aliases = {{"src", "sources"}, {"version", "format"}};
  EXPECT_EQ(error_of([&] { check_keys(table_of("sources = []\ncflags = []\n"), "cpu", allowed); }),
            field_error("(no error)", ""));
  EXPECT_EQ(error_of([&] { check_keys(table_of("cflag = []\n"), "cpu", allowed); }),
            field_error("cpu.cflag", "unknown key \"cflag\" (did you mean \"cflags\"?)"));
  // An alias is suggested where edit distance would not find it...
  EXPECT_EQ(error_of([&] { check_keys(table_of("src = []\n"), "cuda", allowed, aliases); }),
            field_error("cuda.src", "unknown key \"src\" (did you mean \"sources\"?)"));
  // ...but only when it names a key of this table.
  EXPECT_EQ(error_of([&] { check_keys(table_of("version = 1\n"), "", allowed, aliases); }),
            field_error("version", "unknown key \"version\"; expected one of sources, cflags, compiler"));
  EXPECT_EQ(error_of([&] { check_keys(table_of("zzzzzz = 1\n"), "cpu", allowed); }),
            field_error("cpu.zzzzzz", "unknown key \"zzzzzz\"; expected one of sources, cflags, compiler"));
}

}  // namespace
}  // namespace kreg
