#include "inline_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "inline_manifest.h"
#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

// The cell's folder under `root`, with its source: the parser checks that the source exists.
Manifest cell(const std::string& root, const std::string& name, const std::string& signature) {
  const std::string dir = root + "/" + name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/" + name + ".cpp") << "// the cell\n";
  return inline_manifest({name, "cpu", name + ".cpp", signature, {"float32"}, {}}, dir);
}

TEST(InlineKernels, ACellIsFoundByNameAndSaysWhenItsDefinitionChanged) {
  test_support::TempDir nb, other;
  EXPECT_FALSE(find_inline_kernel("ik_scale").has_value());
  EXPECT_TRUE(define_inline_kernel(cell(nb.path(), "ik_scale", "ik_scale(Tensor x, float a) -> Tensor")));
  EXPECT_FALSE(define_inline_kernel(cell(nb.path(), "ik_scale", "ik_scale(Tensor x, float a) -> Tensor")));  // the cell run again
  std::optional<Manifest> found = find_inline_kernel("ik_scale");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->file, "%%kernel ik_scale");
  EXPECT_EQ(found->dir, nb.path() + "/ik_scale");
  EXPECT_NE(found->inline_text.find("ik_scale(Tensor x, float a) -> Tensor"), std::string::npos);

  EXPECT_TRUE(define_inline_kernel(cell(nb.path(), "ik_scale", "ik_scale(Tensor x, float a, float b) -> Tensor")));
  EXPECT_EQ(find_inline_kernel("ik_scale")->ops[0].signature.args.size(), 3u);
  EXPECT_TRUE(define_inline_kernel(cell(other.path(), "ik_scale", "ik_scale(Tensor x, float a, float b) -> Tensor")));
}

TEST(InlineKernels, NamesAreListedSorted) {
  test_support::TempDir nb;
  define_inline_kernel(cell(nb.path(), "ik_zeta", "ik_zeta(Tensor x) -> Tensor"));
  define_inline_kernel(cell(nb.path(), "ik_alpha", "ik_alpha(Tensor x) -> Tensor"));
  std::vector<std::string> names = inline_kernel_names();
  std::vector<std::string> ours;
  for (const std::string& n : names) {
    if (n == "ik_alpha" || n == "ik_zeta") ours.push_back(n);
  }
  EXPECT_EQ(ours, (std::vector<std::string>{"ik_alpha", "ik_zeta"}));
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

}  // namespace
}  // namespace kreg
