#include "dtype_units.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "build_keys.h"
#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;

// gemm's shape: one [cuda] unit per dtype, named like its launcher, and one
// [cpu] unit for both.
Manifest gemm_like(const std::string& dir) {
  for (const char* file : {"gemm_bf16.cu", "gemm_f16.cu", "gemm_cpu.cpp", "common.cu"}) {
    std::ofstream(fs::path(dir) / file) << "// " << file << "\n";
  }
  const std::string text =
      "format = 1\n"
      "[cpu]\nsources = [\"gemm_cpu.cpp\"]\n"
      "[cuda]\nsources = [\"gemm_bf16.cu\", \"gemm_f16.cu\", \"common.cu\"]\n"
      "[[op]]\nsignature = \"gemm(Tensor a, Tensor b) -> Tensor\"\ndtypes = [\"bfloat16\", \"float16\"]\n"
      "[[op]]\nsignature = \"cast(Tensor a) -> Tensor\"\ndtypes = [\"float16\"]\nlauncher = \"gemm_cast\"\n";
  return parse_manifest_text(text, dir + "/kernel.toml", dir);
}

TEST(DtypeUnits, LeavesOutOtherDtypesOwnUnitsOnly) {
  test_support::TempDir tmp;
  const Manifest m = gemm_like(tmp.path());
  const Manifest bf16 = with_dtypes(m, "cuda", {"bfloat16"});
  EXPECT_EQ(bf16.cuda.sources, (std::vector<std::string>{"gemm_bf16.cu", "common.cu"}));
  EXPECT_EQ(bf16.ops[0].dtypes, std::vector<std::string>{"bfloat16"});
  EXPECT_EQ(bf16.ops[1].dtypes, std::vector<std::string>{"float16"});  // its launcher lives in a shared unit
  EXPECT_EQ(bf16.dtype_subset, (std::vector<std::string>{"gemm:bfloat16", "cast:float16"}));
  const Manifest f16 = with_dtypes(m, "cuda", {"float16"});
  EXPECT_EQ(f16.cuda.sources, (std::vector<std::string>{"gemm_f16.cu", "common.cu"}));
}

TEST(DtypeUnits, NothingLeftOutIsThePlainManifest) {
  test_support::TempDir tmp;
  const Manifest m = gemm_like(tmp.path());
  for (const Manifest& same : {with_dtypes(m, "cuda", {"bfloat16", "float16"}), with_dtypes(m, "cpu", {"bfloat16"})}) {
    EXPECT_EQ(same.cuda.sources, m.cuda.sources);
    EXPECT_EQ(same.ops[0].dtypes, m.ops[0].dtypes);
    EXPECT_TRUE(same.dtype_subset.empty());
  }
}

TEST(DtypeUnits, AnOpKeepsItsLastDtype) {
  test_support::TempDir tmp;
  const Manifest m = gemm_like(tmp.path());
  std::ofstream(fs::path(tmp.path()) / "gemm_cast_f16.cu") << "//\n";
  Manifest own = m;
  own.cuda.sources.push_back("gemm_cast_f16.cu");
  const Manifest bf16 = with_dtypes(own, "cuda", {"bfloat16"});
  EXPECT_EQ(bf16.ops[1].dtypes, std::vector<std::string>{"float16"});
  EXPECT_EQ(bf16.cuda.sources, (std::vector<std::string>{"gemm_bf16.cu", "common.cu", "gemm_cast_f16.cu"}));
}

}  // namespace
}  // namespace kreg
