#include "include_scan.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace kreg {
namespace {

// A private folder that is deleted with the test.
using test_support::TempDir;

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(IncludeDirectives, SpellingsAndComments) {
  const std::string text =
      "#include \"a.h\"\n"
      "#  include \"b.h\"  // trailing comment\n"
      "# include <c.h>\r\n"
      "   \t#\tinclude<d/e.h>\n"
      "int x; #include \"not_at_line_start.h\"\n"
      "#include_next <f.h>\n"
      "#include MACRO_NAME\n"
      "#include \"unterminated.h\n"
      "#include <>\n"
      "#define include \"g.h\"\n"
      "#include \"last.h\"";  // no final newline
  const std::vector<IncludeDirective> found = find_include_directives(text);
  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(found[0].name, "a.h");
  EXPECT_FALSE(found[0].angled);
  EXPECT_EQ(found[0].line, 1);
  EXPECT_EQ(found[1].name, "b.h");
  EXPECT_EQ(found[2].name, "c.h");
  EXPECT_TRUE(found[2].angled);
  EXPECT_EQ(found[2].line, 3);
  EXPECT_EQ(found[3].name, "d/e.h");
  EXPECT_TRUE(found[3].angled);
  EXPECT_EQ(found[4].name, "last.h");
  EXPECT_EQ(found[4].line, 11);
}

TEST(IncludeDirectives, ArbitraryBytesDoNotCrash) {
  // Every prefix of a nasty string, plus raw byte soup: must simply return.
  using namespace std::string_literals;
  const std::string nasty = "#include \"\0\r\n#\n#include <\xff\xfe>\r\r\n# include"s;
  for (size_t n = 0; n <= nasty.size(); ++n) find_include_directives(nasty.substr(0, n));
  std::string soup;
  for (int i = 0; i < 4096; ++i) soup += static_cast<char>((i * 7919) & 0xff);
  find_include_directives(soup);
  EXPECT_TRUE(find_include_directives("").empty());
  EXPECT_TRUE(find_include_directives("\n\n\n").empty());
}

TEST(IncludeScan, FindsHeaderTwoLevelsDeep) {
  TempDir dir;
  const std::string src = dir.write("k.cpp", "#include \"a.h\"\n#include <vector>\n");
  const std::string a = dir.write("a.h", "#pragma once\n#include \"sub/b.h\"\n");
  const std::string b = dir.write("sub/b.h", "#include \"c.h\"\n");  // relative to sub/
  const std::string c = dir.write("sub/c.h", "int c;\n");
  IncludeClosure closure = scan_include_closure({src}, {});
  std::vector<std::string> expected = {src, a, b, c};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(closure.files, expected);
  EXPECT_TRUE(closure.unresolved.empty());
}

TEST(IncludeScan, HeaderFoundOnlyThroughIncludeDir) {
  TempDir dir;
  const std::string src = dir.write("k.cpp", "#include \"math.h\"\n");
  const std::string header = dir.write("include/math.h", "\n");
  IncludeClosure closure = scan_include_closure({src}, {dir.path() + "/include"});
  EXPECT_TRUE(contains(closure.files, header));
  EXPECT_TRUE(closure.unresolved.empty());
}

TEST(IncludeScan, AngledUsesIncludeDirsButNotTheIncludersFolder) {
  TempDir dir;
  const std::string src =
      dir.write("k.cpp", "#include <local.h>\n#include <proj/api.h>\n");
  const std::string local = dir.write("local.h", "\n");  // next to k.cpp: not searched for <>
  const std::string api = dir.write("include/proj/api.h", "\n");
  IncludeClosure closure = scan_include_closure({src}, {dir.path() + "/include"});
  EXPECT_TRUE(contains(closure.files, api));
  EXPECT_FALSE(contains(closure.files, local));
  EXPECT_TRUE(closure.unresolved.empty());  // an unresolved <...> is a system header
}

TEST(IncludeScan, SystemHeadersAreSkipped) {
  TempDir dir;
  const std::string src = dir.write(
      "k.cu", "#include <vector>\n#include <cuda_runtime.h>\n#include <torch/extension.h>\n");
  IncludeClosure closure = scan_include_closure({src}, {dir.path()});
  EXPECT_EQ(closure.files, std::vector<std::string>{src});
  EXPECT_TRUE(closure.unresolved.empty());
}

TEST(IncludeScan, CyclesTerminate) {
  TempDir dir;
  const std::string a = dir.write("a.h", "#include \"b.h\"\n#include \"a.h\"\n");
  const std::string b = dir.write("b.h", "#include \"a.h\"\n");
  const std::string src = dir.write("k.cpp", "#include \"a.h\"\n");
  IncludeClosure closure = scan_include_closure({src, src}, {dir.path()});
  std::vector<std::string> expected = {src, a, b};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(closure.files, expected);
}

TEST(IncludeScan, SymlinkLoopTerminatesAndDuplicatesCollapse) {
  TempDir dir;
  const std::string a = dir.write("d/a.h", "#include \"loop/a.h\"\n");
  std::filesystem::create_directory_symlink(".", dir.path() + "/d/loop");
  const std::string src = dir.write("k.cpp", "#include \"d/a.h\"\n#include \"d/loop/loop/a.h\"\n");
  IncludeClosure closure = scan_include_closure({src}, {});
  std::vector<std::string> expected = {src, a};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(closure.files, expected);
}

TEST(IncludeScan, UnresolvedQuotedIncludeIsReportedWithLine) {
  TempDir dir;
  const std::string src = dir.write("k.cpp", "// first\n\n#include \"typo.h\"\n");
  IncludeClosure closure = scan_include_closure({src}, {dir.path()});
  ASSERT_EQ(closure.unresolved.size(), 1u);
  EXPECT_EQ(closure.unresolved[0], src + ":3: typo.h");
  EXPECT_EQ(closure.files, std::vector<std::string>{src});
}

TEST(IncludeScan, MissingSourceIsReported) {
  TempDir dir;
  IncludeClosure closure = scan_include_closure({dir.path() + "/nope.cpp"}, {});
  EXPECT_TRUE(closure.files.empty());
  ASSERT_EQ(closure.unresolved.size(), 1u);
  EXPECT_NE(closure.unresolved[0].find("nope.cpp"), std::string::npos);
}

TEST(IncludeScan, PathsAreNormalized) {
  TempDir dir;
  const std::string header = dir.write("inc/h.h", "\n");
  const std::string src = dir.write("src/k.cpp", "#include \"../inc/./h.h\"\n");
  IncludeClosure closure = scan_include_closure({dir.path() + "/src/../src/k.cpp"}, {});
  std::vector<std::string> expected = {header, src};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(closure.files, expected);
}

}  // namespace
}  // namespace kreg
