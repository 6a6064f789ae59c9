#include "binding_text.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kreg {
namespace {

using namespace binding_text;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(BindingText, ParamsReturnsAndLauncherTypes) {
  const Signature sig = parse_signature("ln(Tensor x, Tensor? b, int[] dims, float eps=1e-05) -> (Tensor y, Tensor m)");
  EXPECT_EQ(cpp_params(sig),
            "const at::Tensor& x, const std::optional<at::Tensor>& b, c10::IntArrayRef dims, double eps");
  EXPECT_EQ(schema_params(sig), "Tensor x, Tensor? b, int[] dims, float eps");  // positional, no defaults
  EXPECT_EQ(schema_returns(sig), "(Tensor, Tensor)");
  EXPECT_EQ(cpp_return_type(sig), "std::tuple<at::Tensor, at::Tensor>");
  EXPECT_EQ(launcher_params(sig),
            "kreg_tensor, kreg_tensor, kreg_tensor, kreg_tensor, kreg_int_list, float, void*");
  EXPECT_EQ(first_tensor(sig, "test").name, "x");
}

TEST(BindingText, NoReturnsIsVoid) {
  const Signature sig = parse_signature("fill(Tensor(a!) x, float v) -> ()");
  EXPECT_EQ(schema_returns(sig), "()");
  EXPECT_EQ(cpp_return_type(sig), "void");
}

TEST(BindingText, FirstTensorNamesTheCallerWhenThereIsNone) {
  // The parser refuses such a signature; the generators check again.
  Signature sig = parse_signature("f(Tensor x, int k) -> Tensor");
  sig.args.erase(sig.args.begin());
  try {
    first_tensor(sig, "generate_binding");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "generate_binding: signature has no Tensor argument")) << e.what();
  }
}

TEST(BindingText, TheAotPrologueLooksNoTableUpByAddress) {
  EXPECT_FALSE(contains(prologue("cpu"), "table_at("));  // an AOT unit's tables are constants
  EXPECT_TRUE(contains(prologue("cuda"), "#include <c10/core/DeviceGuard.h>"));
  EXPECT_FALSE(contains(prologue("cuda"), "c10/cuda"));  // builds from torch's wheels alone
  EXPECT_FALSE(contains(prologue("cpu"), "c10/cuda"));
}

}  // namespace
}  // namespace kreg
