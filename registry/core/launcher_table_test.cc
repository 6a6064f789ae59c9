#include "launcher_table.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "launcher_header.h"
#include "output_spec.h"

namespace kreg {
namespace {

OpSpec op(const std::string& signature, std::vector<std::string> dtypes) {
  OpSpec spec;
  spec.signature = parse_signature(signature);
  spec.dtypes = std::move(dtypes);
  spec.launcher = spec.signature.name;
  spec.arg_dtypes.assign(spec.signature.args.size(), -1);
  return spec;
}

std::vector<std::pair<std::string, std::string>> symbols_of(const OpSpec& spec) {
  std::vector<std::pair<std::string, std::string>> symbols;
  for (const std::string& dtype : spec.dtypes) symbols.emplace_back(dtype, launcher_symbol(spec, dtype));
  return symbols;
}

int f32_launcher, bf16_launcher, axpy_entry, rows_entry;  // stand-ins: only their addresses matter

void* lookup(const std::string& symbol) {
  static const std::map<std::string, void*> exported = {{"axpy_f32", &f32_launcher}, {"axpy_bf16", &bf16_launcher},
                                                         {"kreg_entry__axpy", &axpy_entry},
                                                         {"kreg_entry__rows", &rows_entry}};
  const auto it = exported.find(symbol);
  return it == exported.end() ? nullptr : it->second;
}

TEST(LauncherTable, HasOneSlotPerDtypeOfTheTable) {
  EXPECT_EQ(dtype_table().size(), static_cast<size_t>(kTableDtypeSlots));
}

TEST(LauncherTable, FillsLaunchersByDtypeCodeAndNamesTheOp) {
  OpSpec axpy = op("axpy(Tensor x, Tensor y, float alpha) -> Tensor", {"float32", "bfloat16"});
  axpy.same_shape = {"y"};
  const auto owned = make_launcher_table("demo", axpy, symbols_of(axpy), lookup);
  const LauncherTable& t = owned->table();
  EXPECT_EQ(t.magic, kTableMagic);
  EXPECT_STREQ(t.op_name, "demo.axpy");
  EXPECT_STREQ(t.dtypes, "float32, bfloat16");
  EXPECT_EQ(t.launchers[dtype_code("float32")], &f32_launcher);
  EXPECT_EQ(t.launchers[dtype_code("bfloat16")], &bf16_launcher);
  EXPECT_EQ(t.launchers[dtype_code("float16")], nullptr);
  EXPECT_EQ(t.same_shape_mask, uint64_t{1} << 1);
  EXPECT_EQ(t.arg_dtypes[0], -1);
  EXPECT_EQ(owned->address(), reinterpret_cast<uintptr_t>(&t));
  // The signature, for the shared binding.
  EXPECT_EQ(t.entry, &axpy_entry);
  EXPECT_EQ(t.arg_count, 3);
  EXPECT_EQ(t.return_count, 1);
  EXPECT_EQ(t.first_tensor, 0);
  EXPECT_EQ(std::string(t.arg_kinds, 3), "TTf");
  EXPECT_STREQ(t.arg_names[2], "alpha");
  EXPECT_EQ(t.mutated_mask, 0u);
}

TEST(LauncherTable, DescribesEveryArgumentKind) {
  OpSpec f = op("rows(Tensor? w, Tensor(a!) x, int[] d, ScalarType? t=None, bool b=False, int k=1) -> ()", {"float32"});
  f.launcher = "axpy";
  const auto owned = make_launcher_table("demo", f, symbols_of(f), lookup);
  const LauncherTable& t = owned->table();
  EXPECT_EQ(std::string(t.arg_kinds, 6), "OTlsbi");
  EXPECT_EQ(t.first_tensor, 1);
  EXPECT_EQ(t.return_count, 0);
  EXPECT_EQ(t.mutated_mask, uint64_t{1} << 1);
  EXPECT_EQ(t.entry, &rows_entry);
}

TEST(LauncherTable, ALibraryWithoutTheOpsEntrySaysToRebuild) {
  OpSpec g = op("g(Tensor x) -> Tensor", {"float32"});
  g.launcher = "axpy";
  try {
    make_launcher_table("demo", g, symbols_of(g), lookup);
    FAIL() << "a library without kreg_entry__g must throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("has no kreg_entry__g"), std::string::npos) << error.what();
  }
}

TEST(LauncherTable, CopiesOutputDeclarations) {
  OpSpec rows = op("rows(Tensor x, int k) -> Tensor", {"float32"});
  rows.launcher = "axpy";  // reuse the lookup's symbols
  rows.outputs = {parse_output_spec("float32[x.size(0), 4]", rows.signature, "out")};
  rows.arg_dtypes = {-1, -1};
  const auto owned = make_launcher_table("demo", rows, symbols_of(rows), lookup);
  const TableOutputDecl& out = owned->table().outputs[0];
  EXPECT_EQ(out.dtype_code, dtype_code("float32"));
  ASSERT_EQ(out.ndims, 2);
  EXPECT_EQ(out.dims[0].kind, DimTerm::kSize);
  EXPECT_EQ(out.dims[0].arg, 0);
  EXPECT_EQ(out.dims[0].a, 0);
  EXPECT_EQ(out.dims[1].kind, DimTerm::kConst);
  EXPECT_EQ(out.dims[1].a, 4);
}

TEST(LauncherTable, AMissingLauncherSaysWhatToDefine) {
  const OpSpec axpy = op("axpy(Tensor x, Tensor y, float alpha) -> Tensor", {"float32", "float16"});
  try {
    make_launcher_table("demo", axpy, symbols_of(axpy), lookup);
    FAIL() << "a missing launcher must throw";
  } catch (const std::runtime_error& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("kernel demo, op axpy: no launcher for float16"), std::string::npos) << text;
    EXPECT_EQ(text.find("float32"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace kreg

namespace kreg {
namespace {

int tuned_launcher;  // a stand-in for another config's launcher

TEST(LauncherTable, RoutedCopyKeepsTheBaseAndAddsTheRoutes) {
  OpSpec axpy = op("axpy(Tensor x, Tensor y, float alpha) -> Tensor", {"float32", "bfloat16"});
  const auto base = make_launcher_table("demo", axpy, symbols_of(axpy), lookup);
  EXPECT_EQ(base->table().route_count, 0);
  EXPECT_EQ(base->table().routes, nullptr);
  const auto routed = routed_launcher_table(
      *base, {Route{"float32", "4096x256", reinterpret_cast<uintptr_t>(&tuned_launcher)}});
  const LauncherTable& t = routed->table();
  EXPECT_NE(routed->address(), base->address());
  EXPECT_STREQ(t.op_name, "demo.axpy");
  EXPECT_NE(t.op_name, base->table().op_name);  // its own strings: the base may go
  EXPECT_EQ(t.launchers[dtype_code("float32")], &f32_launcher);
  ASSERT_EQ(t.route_count, 1);
  EXPECT_EQ(t.routes[0].dtype_slot, dtype_code("float32"));
  EXPECT_EQ(t.routes[0].ndims, 2);
  EXPECT_EQ(t.routes[0].bucket[0], 4096);
  EXPECT_EQ(t.routes[0].bucket[1], 256);
  EXPECT_EQ(t.routes[0].launcher, &tuned_launcher);
  EXPECT_THROW(routed_launcher_table(*base, {Route{"float32", "4096xx", 1}}), std::runtime_error);
  EXPECT_THROW(routed_launcher_table(*base, {Route{"float99", "4", 1}}), std::runtime_error);
  EXPECT_THROW(routed_launcher_table(*base, {Route{"float32", "1x1x1x1x1x1x1x1x1", 1}}), std::runtime_error);
}

}  // namespace
}  // namespace kreg
