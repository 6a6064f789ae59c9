#include "build_keys.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "codegen.h"
#include "hash.h"
#include "launcher_header.h"
#include "stable_binding_text.h"
#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;

// The binding key made without the memo: every input, the text generated and
// digested afresh. binding_key must keep giving exactly this.
Key fresh_binding_key(const std::string& backend, const std::map<std::string, std::string>& env,
                      const std::string& registry_include) {
  KeyBuilder kb;
  kb.add("kind", "binding").add("backend", backend);
  const std::string text = generate_shared_binding(backend);
  kb.add("source", "xxh3-128:" + hash_bytes(text).hex() + " (" + std::to_string(text.size()) + " bytes generated)");
  kb.add_file("registry/include/kreg/abi.h", registry_include + "/kreg/abi.h");
  kb.add_file("registry/include/kreg/launcher_table.h", registry_include + "/kreg/launcher_table.h");
  kb.add("stable_abi", std::string("torch ") + kStableTargetTorch + " and later, Python 3.10 and later");
  const std::set<std::string> not_inputs = {"env.cuda_arch", "toolchain.kernel_lib", "toolchain.nvcc",
                                            "toolchain.pytorch_nvcc", "toolchain.nvcc_host_cc", "env.torch",
                                            "env.torch_cxx11_abi", "env.python", "toolchain.cxx"};
  for (const auto& [name, value] : env) {
    if (name == "env.cuda") {
      kb.add("env.cuda_major", value.substr(0, value.find('.')));
    } else if (not_inputs.count(name) == 0) {
      kb.add(name, value);
    }
  }
  return kb.finish();
}

void expect_same(const Key& a, const Key& b) {
  EXPECT_EQ(a.digest, b.digest);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].value, b.inputs[i].value) << a.inputs[i].name;
  }
}

class BindingKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    include_ = tmp_.path() + "/include";
    write_abi("// abi v1\n");
    write_table("// table v1\n");
    env_ = {{"env.torch", "2.14.1"}, {"toolchain.cxx", "/usr/bin/c++ 13"}, {"toolchain.kernel_lib", "r2"}};
  }
  void write_abi(const std::string& text) const {
    fs::create_directories(include_ + "/kreg");
    std::ofstream(include_ + "/kreg/abi.h", std::ios::binary) << text;
  }
  void write_table(const std::string& text) const {
    fs::create_directories(include_ + "/kreg");
    std::ofstream(include_ + "/kreg/launcher_table.h", std::ios::binary) << text;
  }

  test_support::TempDir tmp_;
  std::string include_;
  std::map<std::string, std::string> env_;
};

TEST_F(BindingKeyTest, TheMemoizedKeyIsTheFreshOne) {
  for (const char* backend : {"cpu", "cuda"}) {
    const Key fresh = fresh_binding_key(backend, env_, include_);
    expect_same(binding_key(backend, env_, include_), fresh);
    expect_same(binding_key(backend, env_, include_), fresh);  // from the memo
  }
  EXPECT_NE(binding_key("cpu", env_, include_).digest, binding_key("cuda", env_, include_).digest);
}

TEST_F(BindingKeyTest, AnotherInputIsHashedAgain) {
  const Key before = binding_key("cpu", env_, include_);
  std::map<std::string, std::string> env = env_;
  env["toolchain.command_lines"] = "another set of command lines";
  expect_same(binding_key("cpu", env, include_), fresh_binding_key("cpu", env, include_));
  EXPECT_NE(binding_key("cpu", env, include_).digest, before.digest);
  write_abi("// abi v2\n");
  expect_same(binding_key("cpu", env_, include_), fresh_binding_key("cpu", env_, include_));
  EXPECT_NE(binding_key("cpu", env_, include_).digest, before.digest);
  write_abi("// abi v1\n");
  expect_same(binding_key("cpu", env_, include_), before);
}

// On torch's stable ABI and Python's limited API, one binding serves every
// torch from the target on and every Python from 3.10 on, for one CUDA major,
// whichever compiler built it: a teammate on another torch, Python or
// compiler finds the same key in the team's cache.
TEST_F(BindingKeyTest, NeitherTorchsPythonsNorTheCompilersVersionIsAnInput) {
  for (const char* backend : {"cpu", "cuda"}) {
    std::map<std::string, std::string> here = env_, there = env_;
    here.insert({{"env.python", "3.11 cpython-311-x86_64-linux-gnu"}, {"env.torch_cxx11_abi", "1"},
                 {"env.cuda", "13.0"}});
    there = here;
    there["env.torch"] = "2.11.0+cu130";
    there["env.python"] = "3.12 cpython-312-x86_64-linux-gnu";
    there["env.torch_cxx11_abi"] = "0";
    there["env.cuda"] = "13.2";
    there["toolchain.cxx"] = "/opt/gcc/bin/g++ | g++ (GCC) 13.3.0";
    const Key a = binding_key(backend, here, include_);
    expect_same(binding_key(backend, there, include_), a);
    bool target_named = false;
    for (const KeyInput& input : a.inputs) {
      EXPECT_NE(input.name, "env.torch");
      EXPECT_NE(input.name, "env.python");
      EXPECT_NE(input.name, "toolchain.cxx");
      target_named = target_named || (input.name == "stable_abi" && input.value.find("torch 2.11") == 0);
    }
    EXPECT_TRUE(target_named);
    there["env.cuda"] = "12.8";  // another CUDA major: another binding
    EXPECT_NE(binding_key(backend, there, include_).digest, a.digest);
  }
}

// The generated text only names kreg/launcher_table.h; a layout change there
// must still give the binding a new key, or a stale binding would read new tables.
TEST_F(BindingKeyTest, TheLauncherTableHeaderIsAnInput) {
  const Key before = binding_key("cuda", env_, include_);
  write_table("// table v2\n");
  expect_same(binding_key("cuda", env_, include_), fresh_binding_key("cuda", env_, include_));
  EXPECT_NE(binding_key("cuda", env_, include_).digest, before.digest);
  write_table("// table v1\n");
  expect_same(binding_key("cuda", env_, include_), before);
}

TEST_F(BindingKeyTest, ThreadsGetTheSameKey) {
  const Key fresh = fresh_binding_key("cuda", env_, include_);
  std::vector<Digest> digests(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < digests.size(); ++i) {
    threads.emplace_back([&, i] { digests[i] = binding_key(i % 2 ? "cuda" : "cpu", env_, include_).digest; });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < digests.size(); ++i) {
    EXPECT_EQ(digests[i], i % 2 ? fresh.digest : fresh_binding_key("cpu", env_, include_).digest);
  }
}

TEST_F(BindingKeyTest, AnUnknownBackendIsRejectedAsBefore) {
  EXPECT_THROW(binding_key("rocm", env_, include_), std::invalid_argument);
}

}  // namespace
}  // namespace kreg
