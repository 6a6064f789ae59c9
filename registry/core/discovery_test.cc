#include "discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kreg {
namespace {

namespace fs = std::filesystem;

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/kreg_discovery_testXXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    tmp_ = path;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  // Creates <root>/<name>/kernel.toml (or just the folder).
  std::string add_kernel(const std::string& root, const std::string& name,
                         bool with_manifest = true) {
    const fs::path dir = fs::path(tmp_) / root / name;
    fs::create_directories(dir);
    if (with_manifest) std::ofstream(dir / "kernel.toml") << "format = 1\n";
    return (dir / "kernel.toml").string();
  }

  std::string root(const std::string& name) const { return (fs::path(tmp_) / name).string(); }

  std::string tmp_;
};

TEST_F(DiscoveryTest, ListsValidKernelsSortedWithShadowing) {
  const std::string a1 = add_kernel("r1", "beta");
  const std::string b1 = add_kernel("r1", "alpha");
  add_kernel("r1", "no_manifest", /*with_manifest=*/false);
  add_kernel("r1", "Bad-Name");
  add_kernel("r1", ".hidden");
  std::ofstream(root("r1") + "/loose_file") << "x";
  add_kernel("r2", "alpha");  // shadowed by r1/alpha
  const std::string c2 = add_kernel("r2", "gamma");
  const std::string n2 = add_kernel("r2", "no_manifest");  // r1's folder has none, so r2 wins

  const std::vector<KernelLocation> found =
      discover_kernels({root("r1"), root("missing"), root("r2")});
  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(found[0].name, "alpha");
  EXPECT_EQ(found[0].manifest, b1);
  EXPECT_EQ(found[1].name, "bad_name");  // any folder holds a kernel, under a derived name
  EXPECT_EQ(found[1].folder, "Bad-Name");
  EXPECT_EQ(found[2].name, "beta");
  EXPECT_EQ(found[2].manifest, a1);
  EXPECT_EQ(found[3].name, "gamma");
  EXPECT_EQ(found[3].manifest, c2);
  EXPECT_EQ(found[4].name, "no_manifest");
  EXPECT_EQ(found[4].manifest, n2);
}

TEST_F(DiscoveryTest, NameKeyNamesTheKernelAndTheFolderStillFindsIt) {
  const std::string manifest = add_kernel("r1", "lab-02-m3");
  std::ofstream(manifest) << "format = 1\nname = \"lab02\"\n";
  const std::vector<std::string> roots = {root("r1")};
  const std::vector<KernelLocation> found = discover_kernels(roots);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].name, "lab02");
  for (const char* asked : {"lab02", "lab-02-m3"}) {
    const std::optional<KernelLocation> located = locate_kernel(asked, roots);
    ASSERT_TRUE(located.has_value()) << asked;
    EXPECT_EQ(located->manifest, manifest);
  }
  EXPECT_FALSE(locate_kernel("lab_02_m3", roots).has_value());  // the key replaces the derived name
}

// Neither folder wins a name both give: the reason names both, and a later
// root's kernel of that name is not taken instead.
TEST_F(DiscoveryTest, TwoFoldersGivingOneNameAreBothUnusable) {
  add_kernel("r1", "lab-02-axpy");
  add_kernel("r1", "lab_02_axpy");
  add_kernel("r2", "lab_02_axpy");
  const std::vector<std::string> roots = {root("r1"), root("r2")};
  const Discovery found = discover(roots);
  EXPECT_TRUE(found.kernels.empty());
  ASSERT_EQ(found.unusable.size(), 2u);
  for (const UnusableFolder& u : found.unusable) {
    EXPECT_EQ(u.name, "lab_02_axpy");
    EXPECT_NE(u.reason.find(root("r1") + "/lab-02-axpy and " + root("r1") + "/lab_02_axpy"), std::string::npos)
        << u.reason;
  }
  EXPECT_FALSE(locate_kernel("lab_02_axpy", roots).has_value());
}

TEST_F(DiscoveryTest, FoldersThatCannotBeKernelsAreListedWithTheReason) {
  add_kernel("r1", std::string(70, 'k'));
  const std::string bad_key = add_kernel("r1", "bad_key");
  std::ofstream(bad_key) << "format = 1\nname = \"Bad Name\"\n";
  add_kernel("r1", ".hidden");
  const Discovery found = discover({root("r1")});
  EXPECT_TRUE(found.kernels.empty());
  ASSERT_EQ(found.unusable.size(), 2u);
  EXPECT_NE(found.unusable[0].reason.find("invalid name \"Bad Name\""), std::string::npos) << found.unusable[0].reason;
  EXPECT_NE(found.unusable[1].reason.find("set name = \"...\""), std::string::npos) << found.unusable[1].reason;
}

TEST_F(DiscoveryTest, RootOrderDecidesShadowing) {
  add_kernel("r1", "k");
  const std::string second = add_kernel("r2", "k");
  const std::vector<KernelLocation> found = discover_kernels({root("r2"), root("r1")});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].manifest, second);
}

TEST_F(DiscoveryTest, ManifestPathIsAbsoluteForRelativeRoot) {
  const std::string manifest = add_kernel("r1", "axpy");
  const std::string relative = fs::relative(root("r1")).string();
  ASSERT_FALSE(fs::path(relative).is_absolute());
  const std::vector<KernelLocation> found = discover_kernels({relative});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(fs::path(found[0].manifest).is_absolute()) << found[0].manifest;
  EXPECT_TRUE(fs::equivalent(found[0].manifest, manifest));
}

TEST_F(DiscoveryTest, MissingRootsAndFilesAsRootsYieldNothing) {
  std::ofstream(root("a_file")) << "x";
  EXPECT_TRUE(discover_kernels({}).empty());
  EXPECT_TRUE(discover_kernels({root("missing"), root("a_file")}).empty());
}

TEST_F(DiscoveryTest, SymlinkedKernelFolderCounts) {
  add_kernel("elsewhere", "real");
  fs::create_directories(root("r1"));
  fs::create_directory_symlink(root("elsewhere") + "/real", root("r1") + "/linked");
  const std::vector<KernelLocation> found = discover_kernels({root("r1")});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].name, "linked");
}

// locate_kernel answers for one name exactly what discover_kernels lists.
TEST_F(DiscoveryTest, LocateAgreesWithDiscovery) {
  add_kernel("r1", "beta");
  add_kernel("r1", "no_manifest", /*with_manifest=*/false);
  add_kernel("r1", "Bad-Name");
  std::ofstream(root("r1") + "/loose_file") << "x";
  add_kernel("r2", "beta");
  add_kernel("r2", "no_manifest");
  add_kernel("elsewhere", "real");
  fs::create_directory_symlink(root("elsewhere") + "/real", root("r2") + "/linked");
  const std::vector<std::string> roots = {root("r1"), root("missing"), root("r2")};
  const std::vector<KernelLocation> listed = discover_kernels(roots);
  ASSERT_EQ(listed.size(), 4u);
  for (const KernelLocation& loc : listed) {
    const std::optional<KernelLocation> found = locate_kernel(loc.name, roots);
    ASSERT_TRUE(found.has_value()) << loc.name;
    EXPECT_EQ(found->manifest, loc.manifest) << loc.name;
  }
  ASSERT_EQ(locate_kernel("Bad-Name", roots)->name, "bad_name");  // by its folder's name
  for (const char* absent : {"loose_file", "gamma", "", "..", "r1/beta"}) {
    EXPECT_FALSE(locate_kernel(absent, roots).has_value()) << absent;
  }
}

}  // namespace
}  // namespace kreg
