#include "plan.h"

#include "file_read.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "build_claim.h"
#include "derived_manifest.h"
#include "file_read.h"
#include "hash.h"
#include "inline_manifest.h"
#include "launcher_header.h"
#include "temp_dir_for_tests.h"

namespace kreg {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
  // Dated a minute back, as files are by the time a user runs get: a file
  // written in the tick of its stamp is racy (file_stamp.h) and re-hashed,
  // which these tests of the memo's verdicts are not about.
  fs::last_write_time(path, fs::last_write_time(path) - std::chrono::seconds(60));
}

// <tmp>/kernels/axpy (a CPU kernel with one header), <tmp>/include/kreg/abi.h and launcher_table.h
// (the registry's headers) and <tmp>/cache.
class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path();
    dir_ = root_ + "/kernels/axpy";
    write_file(dir_ + "/kernel.toml",
               "format = 1\ninclude_dirs = [\"include\"]\n[cpu]\nsources = [\"axpy_cpu.cpp\"]\ncflags = [\"-O3\"]\n"
               "[[op]]\nsignature = \"axpy(Tensor x, Tensor y, float alpha) -> Tensor\"\n"
               "dtypes = [\"float32\", \"float16\"]\n");
    write_file(dir_ + "/axpy_cpu.cpp", "#include \"axpy_math.h\"\n");
    write_file(dir_ + "/include/axpy_math.h", "// math v1\n");
    write_file(root_ + "/include/kreg/abi.h", "// abi\n");
    write_file(root_ + "/include/kreg/launcher_table.h", "// launcher table\n");
    facts_.backend = "cpu";
    facts_.env = {{"env.torch", "2.14.1"}, {"toolchain.cxx", "/usr/bin/c++ 13"}, {"toolchain.kernel_lib", "r2"},
                  {"toolchain.command_lines", "0123abcd"}};
    facts_.registry_include = root_ + "/include";
  }

  Manifest manifest() const { return parse_manifest(dir_ + "/kernel.toml"); }
  CacheStore store() const { return CacheStore(root_ + "/cache"); }

  // Publishes a fake build of `artifact` as a build would, through a claim.
  Published build(const CacheStore& s, ArtifactPlan& artifact, std::vector<std::string> reported = {}) {
    Claim claim = try_claim(s, artifact);
    EXPECT_FALSE(claim.busy());
    EXPECT_FALSE(claim.hit.has_value());
    write_file(claim.staging + "/lib.so", "binary of " + artifact.what);
    Entry entry;
    entry.kernel = "axpy";
    entry.backend = "cpu";
    entry.kind = artifact.kind;
    entry.artifact = "lib.so";
    return publish_claim(s, artifact, claim, entry, reported, 0);
  }

  // A cold get's acts: build every artifact the plan misses, then record.
  void build_all(Plan& plan) {
    CacheStore s = store();
    std::optional<Key> lib_key;
    std::vector<FileStamp> extra;
    for (ArtifactPlan& a : plan.artifacts) {
      if (!a.missing()) continue;
      Published p = build(s, a);
      if (a.what == "lib") lib_key = p.key, extra = p.extra_stamps;
    }
    record_outcome(plan, Outcome{lib_key, extra, {}, true});
  }

  TempDir tmp_;
  std::string root_, dir_;
  PlanFacts facts_;
};

TEST_F(PlanTest, ColdPlanMissesEverythingAndWritesWhatTheBuildsNeed) {
  Plan plan = make_plan(manifest(), facts_, store());
  ASSERT_EQ(plan.artifacts.size(), 2u);
  const ArtifactPlan& lib = plan.artifacts[0];
  const ArtifactPlan& binding = plan.artifacts[1];
  EXPECT_EQ(lib.what, "lib");
  EXPECT_EQ(lib.kind, "kernel-lib");
  EXPECT_TRUE(lib.missing());
  EXPECT_FALSE(lib.key.has_value());  // no dependency record yet: only the build can tell
  ASSERT_TRUE(lib.base.has_value());
  EXPECT_EQ(lib.lock_key, lib.base->digest.hex());
  EXPECT_EQ(lib.scanned, (std::vector<std::string>{dir_ + "/axpy_cpu.cpp", dir_ + "/include/axpy_math.h",
                                                   dir_ + "/kernel.toml"}));
  EXPECT_EQ(plan.stamps.size(), 3u);
  EXPECT_FALSE(plan.memo_vouched);
  EXPECT_FALSE(plan.memo_current);
  EXPECT_TRUE(plan.changes.empty());  // known once the key is
  EXPECT_EQ(binding.what, "binding");
  EXPECT_EQ(binding.kind, "binding");
  EXPECT_TRUE(binding.missing());
  EXPECT_EQ(binding.namespace_name, plan.binding_module);
  EXPECT_EQ(binding.namespace_name.rfind("kreg_binding_cpu_", 0), 0u);
  EXPECT_EQ(plan.namespaces.at("axpy").rfind("kreg_", 0), 0u);
  EXPECT_EQ(plan.binding_schemas.at("axpy"), "call(Tensor x, Tensor y, float alpha, int kreg_table) -> Tensor");
  EXPECT_TRUE(fs::is_regular_file(binding.source));
  EXPECT_TRUE(fs::is_regular_file(plan.launcher_header));
  EXPECT_EQ(plan.launchers.at("axpy"),
            (std::vector<std::pair<std::string, std::string>>{{"float32", "axpy_f32"}, {"float16", "axpy_f16"}}));
}

TEST_F(PlanTest, AfterABuildTheNextPlanHitsThroughTheMemoWithoutChanges) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  EXPECT_EQ(cold.changes, (std::vector<std::string>{"no previous build recorded in this cache"}));

  Plan warm = make_plan(manifest(), facts_, store());
  EXPECT_TRUE(warm.memo_vouched);
  EXPECT_TRUE(warm.memo_current);
  for (const ArtifactPlan& a : warm.artifacts) EXPECT_FALSE(a.missing()) << a.what;
  EXPECT_TRUE(warm.changes.empty());
  EXPECT_TRUE(warm.launcher_header.empty());  // nothing to build: nothing generated
}

// A notebook cell's manifest (inline_manifest.h): no kernel.toml, its text keyed in place of one.
TEST_F(PlanTest, AnInlineManifestsTextIsKeyedAndAChangeOfItIsNotVouchedForByTheMemo) {
  const std::string cell_dir = root_ + "/inline/cell";
  write_file(cell_dir + "/cell.cpp", "// the cell's launchers\n");
  auto cell = [&](const std::vector<std::string>& dtypes) {
    return inline_manifest({"cell", "cpu", "cell.cpp", "cell(Tensor x, float a) -> Tensor", dtypes, {}}, cell_dir);
  };
  Plan cold = make_plan(cell({"float32"}), facts_, store());
  EXPECT_EQ(cold.artifacts[0].scanned, std::vector<std::string>{cell_dir + "/cell.cpp"});  // no file for the manifest
  build_all(cold);
  Plan warm = make_plan(cell({"float32"}), facts_, store());
  EXPECT_TRUE(warm.memo_vouched);
  EXPECT_FALSE(warm.artifacts[0].missing());

  // No file moved, the text did: the memo may not vouch, and the key says what changed.
  Plan edited = make_plan(cell({"float32", "float16"}), facts_, store());
  EXPECT_FALSE(edited.memo_vouched);
  EXPECT_TRUE(edited.artifacts[0].missing());
  ASSERT_TRUE(edited.artifacts[0].base.has_value());
  EXPECT_NE(edited.artifacts[0].base->digest, warm.artifacts[0].key->digest);
  build_all(edited);
  Plan back = make_plan(cell({"float32"}), facts_, store());  // going back: the first build, at once
  EXPECT_FALSE(back.artifacts[0].missing());
  EXPECT_EQ(back.artifacts[0].key->digest, warm.artifacts[0].key->digest);

  // The same text written as the folder's kernel.toml (as cells once were) keys the same build.
  write_file(cell_dir + "/kernel.toml", cell({"float32"}).inline_text);
  Plan from_file = make_plan(parse_manifest(cell_dir + "/kernel.toml"), facts_, store());
  ASSERT_TRUE(from_file.artifacts[0].base.has_value());
  EXPECT_EQ(from_file.artifacts[0].base->digest, warm.artifacts[0].base ? warm.artifacts[0].base->digest
                                                                        : cold.artifacts[0].base->digest);
  EXPECT_FALSE(from_file.artifacts[0].missing());
}

TEST_F(PlanTest, ADerivedBuildIsKeyedApartAndLeavesTheKernelsMemoVouching) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  const Manifest checked = with_extra_flags(manifest(), "cpu", {"-fsanitize=address"}, {"-fsanitize=address"},
                                            "checked");
  EXPECT_EQ(checked.dir, manifest().dir);  // no folder of its own: sources stay where they are edited
  Plan derived = make_plan(checked, facts_, store());
  EXPECT_NE(derived.memo_path, cold.memo_path);
  const ArtifactPlan& lib = derived.artifacts.front();
  EXPECT_EQ(lib.what, "lib");
  EXPECT_TRUE(lib.missing());
  ASSERT_TRUE(lib.base.has_value() && cold.artifacts.front().base.has_value());
  EXPECT_NE(lib.base->digest.hex(), cold.artifacts.front().base->digest.hex());
  build_all(derived);
  Plan plain = make_plan(manifest(), facts_, store());  // the kernel's own memo still vouches for its key
  EXPECT_TRUE(plain.memo_vouched);
  for (const ArtifactPlan& a : plain.artifacts) EXPECT_FALSE(a.missing()) << a.what;
  EXPECT_THROW(with_extra_flags(manifest(), "cuda", {"-lineinfo"}, {}, "checked"), ManifestError);  // no [cuda]
  EXPECT_THROW(with_extra_flags(manifest(), "cpu", {}, {}, "not a name"), ManifestError);
}

TEST_F(PlanTest, ABindingLoadedInThisProcessIsNotPlanned) {
  Plan cold = make_plan(manifest(), facts_, store());
  facts_.loaded_namespaces = {cold.binding_module};
  Plan again = make_plan(manifest(), facts_, store());
  ASSERT_EQ(again.artifacts.size(), 1u);
  EXPECT_EQ(again.artifacts[0].what, "lib");
  EXPECT_EQ(again.namespaces.at("axpy"), cold.namespaces.at("axpy"));  // still named, for loading
}

TEST_F(PlanTest, AnEditedHeaderMissesAndSaysWhy) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  write_file(dir_ + "/include/axpy_math.h", "// math v2, longer\n");
  Plan edited = make_plan(manifest(), facts_, store());
  EXPECT_FALSE(edited.memo_vouched);
  EXPECT_TRUE(edited.artifacts[0].missing());
  EXPECT_FALSE(edited.artifacts[1].missing());  // the binding does not depend on kernel files
  build_all(edited);
  EXPECT_EQ(edited.changes, (std::vector<std::string>{"file:include/axpy_math.h changed"}));

  // Back to the first content: found again through the dependency record, no build.
  write_file(dir_ + "/include/axpy_math.h", "// math v1\n");
  Plan back = make_plan(manifest(), facts_, store());
  EXPECT_FALSE(back.artifacts[0].missing());
  EXPECT_EQ(back.changes, (std::vector<std::string>{"file:include/axpy_math.h changed"}));
  EXPECT_FALSE(back.memo_current);
}

// A new argument: only the kernel library rebuilds (the binding serves every
// signature), and the change names the op and both signatures.
TEST_F(PlanTest, ASignatureChangeRebuildsOnlyTheLibraryAndSaysWhichOp) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  std::string edited = read_file(dir_ + "/kernel.toml").value();
  edited.replace(edited.find("float alpha)"), 12, "float alpha, float beta=0.0)");
  write_file(dir_ + "/kernel.toml", edited);
  Plan next = make_plan(manifest(), facts_, store());
  EXPECT_TRUE(next.artifacts[0].missing());
  EXPECT_FALSE(next.artifacts[1].missing());
  EXPECT_EQ(next.namespaces.at("axpy").rfind("kreg_", 0), 0u);
  EXPECT_NE(next.namespaces.at("axpy"), cold.namespaces.at("axpy"));
  build_all(next);
  EXPECT_EQ(next.changes, (std::vector<std::string>{
                              "file:kernel.toml changed",
                              "signature:axpy: axpy(Tensor x, Tensor y, float alpha) -> Tensor -> "
                              "axpy(Tensor x, Tensor y, float alpha, float beta=0.0) -> Tensor"}));
}

TEST_F(PlanTest, AnEnvironmentChangeNamesTheInput) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  facts_.env["toolchain.cxx"] = "/usr/bin/c++ 14";
  Plan next = make_plan(manifest(), facts_, store());
  EXPECT_TRUE(next.artifacts[0].missing());
  EXPECT_FALSE(next.artifacts[1].missing());  // the binding's interface is C: any compiler's serves
  build_all(next);
  EXPECT_EQ(next.changes, (std::vector<std::string>{"toolchain.cxx: /usr/bin/c++ 13 -> /usr/bin/c++ 14"}));
  facts_.env["toolchain.command_lines"] = "4567cdef";
  Plan third = make_plan(manifest(), facts_, store());
  EXPECT_TRUE(third.artifacts[0].missing());
  EXPECT_TRUE(third.artifacts[1].missing());
}

// A direct build includes no torch header; the binding is built on torch's
// stable ABI (stable_binding_text.h): neither is rebuilt for another torch.
TEST_F(PlanTest, NeitherADirectBuildNorTheBindingDependsOnTorchsVersion) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  facts_.env["env.torch"] = "2.15.0";
  Plan next = make_plan(manifest(), facts_, store());
  EXPECT_FALSE(next.artifacts[0].missing());
  EXPECT_FALSE(next.artifacts[1].missing());
}

// The binding depends on no kernel, so rebuild=True compiles
// the kernel's own code again, not the binding.
TEST_F(PlanTest, RebuildForcesTheKernelLibraryAndSaysSo) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  facts_.rebuild = true;
  Plan forced = make_plan(manifest(), facts_, store());
  EXPECT_TRUE(forced.artifacts[0].missing());
  EXPECT_TRUE(forced.artifacts[0].force);
  EXPECT_FALSE(forced.artifacts[1].missing());
  EXPECT_EQ(forced.previous_build_seconds, 0.0);
  build_all(forced);
  EXPECT_EQ(forced.changes, (std::vector<std::string>{"forced rebuild (rebuild=True)"}));
}

TEST_F(PlanTest, ADamagedEntryIsAMissWithItsReason) {
  Plan cold = make_plan(manifest(), facts_, store());
  build_all(cold);
  Plan warm = make_plan(manifest(), facts_, store());
  write_file(warm.artifacts[1].hit->dir + "/lib.so", "cut");
  Plan damaged = make_plan(manifest(), facts_, store());
  EXPECT_TRUE(damaged.artifacts[1].missing());
  EXPECT_FALSE(damaged.artifacts[1].miss_reason.empty());
}

TEST_F(PlanTest, AClaimFindsWhatAnotherProcessBuiltMeanwhile) {
  Plan first = make_plan(manifest(), facts_, store());
  Plan second = make_plan(manifest(), facts_, store());  // planned before the first one built
  build_all(first);
  Claim claim = try_claim(store(), second.artifacts[0]);
  ASSERT_TRUE(claim.hit.has_value());
  EXPECT_FALSE(claim.lock.has_value());  // released at once
  EXPECT_EQ(claim.hit->key, first.artifacts[0].key->digest.hex());
  ASSERT_TRUE(claim.key.has_value());  // for the memo: the key with its inputs
  EXPECT_EQ(claim.key->digest.hex(), claim.hit->key);
}

TEST_F(PlanTest, ARecordedArtifactIsClaimedLikeALibraryAndItsSecondLookFindsTheBaseKey) {
  // The cubin's way: a base key and a dependency record, planned outside make_plan.
  CacheStore s = store();
  KeyBuilder kb;
  kb.add("kind", "device");
  const Key base = kb.finish();
  const std::vector<LabelRoot> roots = key_label_roots(manifest(), facts_.registry_include);
  ArtifactPlan mine = recorded_artifact("device", "device", base, s.deps_path(base.digest.hex()), roots, {}, false);
  EXPECT_EQ(mine.lock_key, base.digest.hex());
  // Another process publishes a build that read nothing beyond the scan (its
  // key is then the base's) and no record yet: the second look finds it.
  ArtifactPlan theirs = mine;
  theirs.record_path = root_ + "/elsewhere.toml";
  Published published = build(s, theirs);
  Claim claim = try_claim(s, mine);
  ASSERT_TRUE(claim.hit.has_value());
  EXPECT_EQ(claim.hit->key, published.key.digest.hex());
}

TEST_F(PlanTest, AHeldLockIsBusy) {
  Plan plan = make_plan(manifest(), facts_, store());
  Claim held = try_claim(store(), plan.artifacts[1]);
  ASSERT_TRUE(held.lock.has_value());
  // flock() locks are per open file description: a second claim in this process is refused too.
  EXPECT_TRUE(try_claim(store(), plan.artifacts[1]).busy());
}

TEST_F(PlanTest, KeysMatchTheirDocumentedInputs) {
  Manifest m = manifest();
  std::vector<std::string> files = {dir_ + "/axpy_cpu.cpp", dir_ + "/include/axpy_math.h", dir_ + "/kernel.toml"};
  Key key = kernel_lib_key(m, facts_, files);
  std::vector<std::string> names;
  for (const KeyInput& input : key.inputs) names.push_back(input.name);
  EXPECT_EQ(names, (std::vector<std::string>{"backend", "file:axpy_cpu.cpp", "file:include/axpy_math.h",
                                             "file:kernel.toml", "flags.cflags", "flags.cpu", "flags.ldflags",
                                             "include_dirs", "kernel", "key.format", "kind", "launcher_header",
                                             "signature:axpy", "toolchain.command_lines", "toolchain.cxx",
                                             "toolchain.kernel_lib"}));
  Key binding = binding_key("cpu", facts_.env, facts_.registry_include);
  names.clear();
  for (const KeyInput& input : binding.inputs) names.push_back(input.name);
  // No signature: one binding serves every op; no torch version: it is built on the stable ABI;
  // no compiler: what it exchanges is C.
  EXPECT_EQ(names, (std::vector<std::string>{"backend", "file:registry/include/kreg/abi.h",
                                             "file:registry/include/kreg/launcher_table.h", "key.format", "kind",
                                             "source", "stable_abi", "toolchain.command_lines"}));
  EXPECT_EQ(binding_namespace(m.ops[0].signature, "cpu"), binding_namespace(m.ops[0].signature, "cpu"));
  EXPECT_NE(binding_namespace(m.ops[0].signature, "cpu"), binding_namespace(m.ops[0].signature, "cuda"));
}

TEST_F(PlanTest, ABindingIsHostCxxWhoseKeyNoCudaCompilerReaches) {
  // A CUDA binding includes no CUDA header: nvcc's identity (or whether there
  // is one at all) must not rebuild it, nor torch's version (the stable ABI);
  // another CUDA major must.
  Manifest m = manifest();
  std::map<std::string, std::string> env = facts_.env;
  env["env.cuda"] = "13.0";
  const std::string plain = binding_key("cuda", env, facts_.registry_include).digest.hex();
  env["toolchain.nvcc"] = "Cuda compilation tools, release 13.0";
  env["toolchain.pytorch_nvcc"] = "/usr/local/cuda/bin/nvcc";
  env["toolchain.nvcc_host_cc"] = "gcc";
  env["env.cuda_arch"] = "9.0";
  EXPECT_EQ(binding_key("cuda", env, facts_.registry_include).digest.hex(), plain);
  env["env.torch"] = "another torch";
  EXPECT_EQ(binding_key("cuda", env, facts_.registry_include).digest.hex(), plain);
  env["env.cuda"] = "12.8";
  EXPECT_NE(binding_key("cuda", env, facts_.registry_include).digest.hex(), plain);
}

TEST_F(PlanTest, ACubinsKeyCoversTheBytesCompiledLabeledAsALibrarysFiles) {
  Manifest m = manifest();
  const std::vector<std::pair<std::string, std::string>> compiler = {{"toolchain.nvrtc", "nvrtc 13.0"}};
  auto key_of = [&](const std::string& device_code, const std::vector<std::string>& options) {
    return device_key(m, facts_.registry_include,
                      {{dir_ + "/sub/../axpy_device.cu", hash_bytes(device_code)},
                       {facts_.registry_include + "/kreg/device.cuh", hash_bytes("header")}},
                      "nvrtc-1", options, compiler);
  };
  Key key = key_of("__global__ void k() {}", {"-arch=sm_90"});
  std::vector<std::string> names;
  for (const KeyInput& input : key.inputs) names.push_back(input.name);
  EXPECT_EQ(names, (std::vector<std::string>{"backend", "file:axpy_device.cu", "file:registry/include/kreg/device.cuh",
                                             "flags.device", "include_dirs", "kernel", "key.format", "kind", "recipe",
                                             "toolchain.nvrtc"}));
  EXPECT_EQ(key_of("__global__ void k() {}", {"-arch=sm_90"}).digest.hex(), key.digest.hex());
  EXPECT_NE(key_of("__global__ void k() { }", {"-arch=sm_90"}).digest.hex(), key.digest.hex());  // the bytes
  EXPECT_NE(key_of("__global__ void k() {}", {"-arch=sm_100"}).digest.hex(), key.digest.hex());  // the options
}

// The launcher header is force-included into a kernel-lib's sources, so its
// generator's version is an input of the kernel-lib's key (a bump rebuilds),
// and of nothing a pybind module compiles (it does not include the header).
TEST_F(PlanTest, TheGeneratedLauncherHeaderKeysTheKernelLibrary) {
  Manifest m = manifest();
  std::vector<std::string> files = {dir_ + "/axpy_cpu.cpp", dir_ + "/kernel.toml"};
  auto value_of = [](const Key& key, const std::string& name) -> std::optional<std::string> {
    for (const KeyInput& input : key.inputs) {
      if (input.name == name) return input.value;
    }
    return std::nullopt;
  };
  EXPECT_EQ(value_of(kernel_lib_key(m, facts_, files), "launcher_header"),
            hash_bytes(generate_launcher_header(m.name, m.ops)).hex());
  m.binding = "pybind";
  EXPECT_EQ(value_of(kernel_lib_key(m, facts_, files), "launcher_header"), std::nullopt);
}

}  // namespace
}  // namespace kreg
