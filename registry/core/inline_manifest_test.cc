#include "inline_manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "manifest.h"
#include "temp_dir_for_tests.h"
#include "toml_util.h"

namespace kreg {
namespace {

TEST(InlineManifest, AnyTextOfTheCellsLineStaysAValue) {
  InlineKernel cell{"inline_esc", "cpu", "inline_esc.cpp",
                    "axpy(Tensor x) -> Tensor\"\n[cuda]\nsources = [\"x.cu\"]\n# \\ \x7f \x01 \t \xc3\xa9",
                    {"float32"},
                    {{"out\"\n[cuda]", "like x\"\\"}, {"y", "float32[x.shape[:-1]]"}}};
  toml::table table;
  ASSERT_FALSE(parse_toml_guarded(inline_manifest_text(cell), "kernel.toml", &table).has_value());
  std::vector<std::string> keys;
  for (const auto& [key, value] : table) keys.emplace_back(key.str());
  EXPECT_EQ(keys, (std::vector<std::string>{"cpu", "description", "format", "op"}));
  const toml::table& op = *table["op"].as_array()->get(0)->as_table();
  EXPECT_EQ(op["signature"].value<std::string>(), cell.signature);
  EXPECT_EQ(op["outputs"]["out\"\n[cuda]"].value<std::string>(), "like x\"\\");
  EXPECT_EQ(op["outputs"]["y"].value<std::string>(), "float32[x.shape[:-1]]");
  EXPECT_EQ(table["cpu"]["sources"][0].value<std::string>(), "inline_esc.cpp");
}

TEST(InlineManifest, AValidCellIsAManifestTheParserReads) {
  test_support::TempDir tmp;
  const std::string dir = tmp.path() + "/rowmax";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rowmax.cu") << "// the cell\n";
  InlineKernel cell{"rowmax", "cuda", "rowmax.cu", "rowmax(Tensor x) -> (Tensor values, Tensor indices)",
                    {"float32", "bfloat16"},
                    {{"values", "x.dtype[x.shape[:-1]]"}, {"indices", "int64[x.shape[:-1]]"}}};
  const Manifest m = parse_manifest_text(inline_manifest_text(cell), dir + "/kernel.toml", dir);
  EXPECT_EQ(m.name, "rowmax");
  EXPECT_TRUE(m.cuda.present);
  EXPECT_FALSE(m.cpu.present);
  ASSERT_EQ(m.ops.size(), 1u);
  EXPECT_EQ(m.ops[0].dtypes, (std::vector<std::string>{"float32", "bfloat16"}));
  ASSERT_EQ(m.ops[0].outputs.size(), 2u);
  EXPECT_EQ(m.ops[0].outputs[1].text, "int64[x.shape[:-1]]");
}

TEST(InlineManifest, ANameOrBackendThatIsNotOneIsRefused) {
  EXPECT_THROW(inline_manifest_text({"Bad Name", "cpu", "k.cpp", "k(Tensor x) -> Tensor", {"float32"}, {}}),
               std::invalid_argument);
  EXPECT_THROW(inline_manifest_text({"k", "metal", "k.cpp", "k(Tensor x) -> Tensor", {"float32"}, {}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace kreg
