#include "codegen.h"

#include <gtest/gtest.h>

#include "signature.h"

namespace kreg {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Codegen, RegistersTheSignatureWithATableArgument) {
  const Signature sig = parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor");
  const std::string text = generate_binding(sig, "cpu", "kreg_0123");
  EXPECT_TRUE(contains(text, "TORCH_LIBRARY(kreg_0123, m)"));
  EXPECT_TRUE(contains(text, "m.def(\"call(Tensor x, Tensor y, float alpha, int kreg_table) -> Tensor\")"));
  EXPECT_TRUE(contains(text, "TORCH_LIBRARY_IMPL(kreg_0123, CPU, m)"));
  EXPECT_TRUE(contains(text, "TORCH_LIBRARY_IMPL(kreg_0123, CUDA, m)"));
}

TEST(Codegen, ChecksEveryTensorArgumentByName) {
  const Signature sig = parse_signature("f(Tensor a, int k, Tensor b, Tensor c) -> Tensor");
  const std::string text = generate_binding(sig, "cpu", "ns");
  EXPECT_TRUE(contains(text, "check_tensor(table, a, \"a\", 0, a, \"a\");"));
  EXPECT_TRUE(contains(text, "check_tensor(table, b, \"b\", 1, a, \"a\");"));
  EXPECT_TRUE(contains(text, "check_tensor(table, c, \"c\", 2, a, \"a\");"));
  EXPECT_FALSE(contains(text, "check_tensor(table, k"));
}

TEST(Codegen, NarrowsFloatsExplicitlyAndPassesIntsAsInt64) {
  const Signature sig = parse_signature("f(Tensor a, float s, int k, bool b) -> Tensor");
  const std::string text = generate_binding(sig, "cpu", "ns");
  EXPECT_TRUE(contains(text, "(kreg_tensor, kreg_tensor, float, int64_t, bool, void*)"));
  EXPECT_TRUE(contains(text, "static_cast<float>(s)"));
  EXPECT_TRUE(contains(text, "double s, int64_t k, bool b, int64_t kreg_table"));
}

TEST(Codegen, CudaBindingUsesTheCurrentStreamOfTheInputsDevice) {
  const Signature sig = parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor");
  const std::string cuda = generate_binding(sig, "cuda", "ns");
  EXPECT_TRUE(contains(cuda, "c10::cuda::getCurrentCUDAStream(x.device().index()).stream()"));
  EXPECT_TRUE(contains(cuda, "c10::cuda::CUDAGuard device_guard(x.device())"));
  EXPECT_TRUE(contains(cuda, "t.is_cuda()"));
  const std::string cpu = generate_binding(sig, "cpu", "ns");
  EXPECT_FALSE(contains(cpu, "getCurrentCUDAStream"));
  EXPECT_FALSE(contains(cpu, "c10/cuda"));
  EXPECT_TRUE(contains(cpu, "t.is_cpu()"));
}

TEST(Codegen, AllocatesThroughPyTorchAndNeverCopies) {
  const std::string text =
      generate_binding(parse_signature("f(Tensor x) -> Tensor"), "cuda", "ns");
  EXPECT_TRUE(contains(text, "at::empty_like(x)"));
  // Hints in messages mention .contiguous() and .to(dtype); the code calls neither.
  EXPECT_FALSE(contains(text, ".contiguous();"));
  EXPECT_FALSE(contains(text, ".to(at::"));
  EXPECT_FALSE(contains(text, "copy_("));
  EXPECT_FALSE(contains(text, "cudaMalloc"));
}

TEST(Codegen, TextDependsOnlyOnSignatureAndBackend) {
  const Signature a = parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor");
  const Signature b = parse_signature("axpy( Tensor x,Tensor y , float alpha )->Tensor");
  EXPECT_EQ(generate_binding(a, "cpu", "ns"), generate_binding(b, "cpu", "ns"));
  EXPECT_NE(generate_binding(a, "cpu", "ns"), generate_binding(a, "cuda", "ns"));
}

TEST(Codegen, NoPythonHeaders) {
  const std::string text =
      generate_binding(parse_signature("f(Tensor x) -> Tensor"), "cuda", "ns");
  EXPECT_FALSE(contains(text, "Python.h"));
  EXPECT_FALSE(contains(text, "pybind11"));
  EXPECT_FALSE(contains(text, "torch/extension.h"));
}

TEST(Codegen, RejectsUnknownBackend) {
  EXPECT_THROW(generate_binding(parse_signature("f(Tensor x) -> Tensor"), "rocm", "ns"),
               std::invalid_argument);
}

}  // namespace
}  // namespace kreg
