#include "toolchain.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "file_stamp.h"
#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

using test_support::TempDir;

// A fake compiler: a shell script that prints what a real one would.
std::string write_script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

TEST(Toolchain, FindInPath) {
  EXPECT_FALSE(find_in_path("sh").empty());
  EXPECT_EQ(find_in_path("kreg-no-such-tool-anywhere"), "");
  EXPECT_EQ(find_in_path(""), "");
}

TEST(Toolchain, IdentifiesGxxAndMemoizes) {
  if (find_in_path("g++").empty()) GTEST_SKIP() << "g++ is not on PATH";
  TempDir dir;
  const std::string memo = dir.path() + "/toolchains.toml";
  const CompilerIdentity first = identify_compiler("g++", memo);
  EXPECT_EQ(first.path[0], '/');
  EXPECT_NE(first.version.find("g++"), std::string::npos) << first.version;
  EXPECT_EQ(first.text(), first.path + " | " + first.version);
  std::optional<FileStat> written = stat_file(memo);
  ASSERT_TRUE(written);

  // A memo hit answers without running the compiler or rewriting the memo.
  const CompilerIdentity second = identify_compiler("g++", memo);
  EXPECT_EQ(second.path, first.path);
  EXPECT_EQ(second.version, first.version);
  EXPECT_TRUE(*stat_file(memo) == *written);
}

TEST(Toolchain, ReplacedBinaryIsAskedAgain) {
  TempDir dir;
  const std::string memo = dir.path() + "/toolchains.toml";
  const std::string cc = write_script(dir.path() + "/mycc", "echo 'mycc 1.0'\necho second\n");
  EXPECT_EQ(identify_compiler(cc, memo).version, "mycc 1.0");
  // New content (and size): the memo must not answer for the old binary.
  write_script(cc, "echo\necho '  mycc 2.0-beta  '\n");
  EXPECT_EQ(identify_compiler(cc, memo).version, "mycc 2.0-beta");
}

TEST(Toolchain, NvccReportsItsReleaseLine) {
  TempDir dir;
  const std::string nvcc = write_script(dir.path() + "/nvcc",
                                        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                                        "echo 'Copyright (c) 2005-2025 NVIDIA Corporation'\n"
                                        "echo 'Cuda compilation tools, release 13.0, V13.0.48'\n"
                                        "echo 'Build cuda_13.0.r13.0/compiler.36424714_0'\n");
  EXPECT_EQ(identify_compiler(nvcc, dir.path() + "/m.toml").version,
            "Cuda compilation tools, release 13.0, V13.0.48");
}

TEST(Toolchain, FailuresNameTheCommand) {
  TempDir dir;
  try {
    identify_compiler("kreg-no-such-compiler", dir.path() + "/m.toml");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("kreg-no-such-compiler"), std::string::npos);
  }
  const std::string broken = write_script(dir.path() + "/broken-cc", "echo oops\nexit 3\n");
  try {
    identify_compiler(broken, dir.path() + "/m.toml");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("broken-cc"), std::string::npos) << e.what();
  }
}

}  // namespace
// The same answer as the kernel's own view of the CPU (the first "flags" line).
TEST(Toolchain, HostFlagsFollowTheCpu) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  bool f16c = false, found = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    found = true;
    f16c = (line + " ").find(" f16c ") != std::string::npos;
    break;
  }
#if defined(__x86_64__)
  ASSERT_TRUE(found);
  EXPECT_EQ(host_cxx_flags(), f16c ? std::vector<std::string>{"-mf16c"} : std::vector<std::string>{});
#else
  (void)found;
  (void)f16c;
  EXPECT_TRUE(host_cxx_flags().empty());
#endif
}

}  // namespace kreg
