#include "codegen.h"

#include <gtest/gtest.h>

#include "signature.h"

namespace kreg {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The generated code with every "..." literal emptied: what it does, not what its messages say.
std::string without_string_literals(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string && c == '\\') {
      ++i;
      continue;
    }
    const bool char_literal = i > 0 && text[i - 1] == '\'' && i + 1 < text.size() && text[i + 1] == '\'';
    if (c == '"' && !char_literal) in_string = !in_string;
    if (!in_string || c == '"') out += c;
  }
  return out;
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
  const Signature sig = parse_signature("f(Tensor a, int k, Tensor b, Tensor? c) -> Tensor");
  const std::string text = generate_binding(sig, "cpu", "ns");
  EXPECT_TRUE(contains(text, "const at::Tensor* kreg_args[4] = {tensor_ptr(a), nullptr, tensor_ptr(b), tensor_ptr(c)};"));
  EXPECT_TRUE(contains(text, "const char* const kreg_names[4] = {\"a\", \"k\", \"b\", \"c\"};"));
  EXPECT_TRUE(contains(text, "check_tensors(table, kreg_args, kreg_names, 4, 0, &kreg_slot, 0ull);"));
  EXPECT_TRUE(contains(text, "const std::optional<at::Tensor>& c"));
}

TEST(Codegen, SeveralOutputsNoOutputsAndInPlace) {
  const std::string two = generate_binding(
      parse_signature("ln(Tensor x, Tensor? b, float eps=1e-05) -> (Tensor y, Tensor mean)"), "cpu", "ns");
  EXPECT_TRUE(contains(two, "std::tuple<at::Tensor, at::Tensor> call("));
  EXPECT_TRUE(contains(two, "at::Tensor kreg_out1 = allocate(table, 1, kreg_args, x);"));
  EXPECT_TRUE(contains(two, "launcher)(view_of(kreg_out0), view_of(kreg_out1), view_of(x), view_of(b), "
                            "static_cast<float>(eps), stream);"));
  EXPECT_TRUE(contains(two, "return {kreg_out0, kreg_out1};"));
  // The JIT schema is positional and without defaults: registry/op.py passes every argument.
  EXPECT_TRUE(contains(two, "m.def(\"call(Tensor x, Tensor? b, float eps, int kreg_table) -> (Tensor, Tensor)\")"));

  const std::string inplace = generate_binding(parse_signature("scale_(Tensor(a!) x, float a) -> ()"), "cpu", "ns");
  EXPECT_TRUE(contains(inplace, "void call(const at::Tensor& x, double a, int64_t kreg_table)"));
  EXPECT_TRUE(contains(inplace, "if (x.numel() == 0) return;"));
  EXPECT_TRUE(contains(inplace, "m.def(\"call(Tensor(a!) x, float a, int kreg_table) -> ()\")"));
  EXPECT_FALSE(contains(inplace, "allocate(table"));
}

TEST(Codegen, AFloat64DispatchPassesFloatArgumentsUnnarrowed) {
  const std::string text = generate_binding(parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor"), "cpu", "ns");
  EXPECT_TRUE(contains(text, "kreg_slot == 3\n      ? reinterpret_cast<const char* (*)(kreg_tensor, kreg_tensor, "
                             "kreg_tensor, double, void*)>(launcher)(view_of(kreg_out0), view_of(x), view_of(y), "
                             "alpha, stream)\n      : reinterpret_cast<Launcher>(launcher)(view_of(kreg_out0), "
                             "view_of(x), view_of(y), static_cast<float>(alpha), stream);"))
      << text;
  // Without a float argument there is one launcher type.
  const std::string ints = generate_binding(parse_signature("f(Tensor x, int k) -> Tensor"), "cpu", "ns");
  EXPECT_FALSE(contains(ints, "kreg_slot == 3"));
}

TEST(Codegen, ListsAndScalarTypes) {
  const std::string text =
      generate_binding(parse_signature("f(Tensor x, int[] dims, ScalarType? t=None) -> Tensor"), "cpu", "ns");
  EXPECT_TRUE(contains(text, "c10::IntArrayRef dims, std::optional<c10::ScalarType> t"));
  EXPECT_TRUE(contains(text, "list_of(dims), code_of(table, t, \"t\"), stream"));
  EXPECT_TRUE(contains(text, "(kreg_tensor, kreg_tensor, kreg_int_list, int32_t, void*)"));
  EXPECT_TRUE(contains(text, "c10::ScalarType::Float8_e4m3fn"));  // the dtype table, every entry
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
  EXPECT_TRUE(contains(cuda, "c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(x.device()).native_handle()"));
  EXPECT_TRUE(contains(cuda, "c10::DeviceGuard device_guard(x.device())"));
  EXPECT_TRUE(contains(cuda, "t.is_cuda()"));
  EXPECT_FALSE(contains(cuda, "c10/cuda"));  // no CUDA header: builds from the wheels alone
  const std::string cpu = generate_binding(sig, "cpu", "ns");
  EXPECT_FALSE(contains(cpu, "getStream"));
  EXPECT_FALSE(contains(cpu, "c10/cuda"));
  EXPECT_TRUE(contains(cpu, "t.is_cpu()"));
}

TEST(Codegen, AllocatesThroughPyTorchAndNeverCopies) {
  const std::string text =
      generate_binding(parse_signature("f(Tensor x) -> Tensor"), "cuda", "ns");
  EXPECT_TRUE(contains(text, "at::Tensor kreg_out0 = allocate(table, 0, kreg_args, x);"));
  // From the allocator torch's CUDA ops use, without a dispatcher call; at::empty
  // where torch fills new memory (deterministic algorithms).
  EXPECT_TRUE(contains(text, "at::detail::getCUDAHooks().getCUDADeviceAllocator()"));
  EXPECT_TRUE(contains(text, "deterministicFillUninitializedMemory()"));
  EXPECT_TRUE(contains(text, "return at::empty(shape, first.options().dtype(dtype));"));
  const std::string cpu = generate_binding(parse_signature("f(Tensor x) -> Tensor"), "cpu", "ns");
  EXPECT_TRUE(contains(cpu, "at::detail::empty_cpu(shape, dtype"));
  EXPECT_FALSE(contains(cpu, "getCUDAHooks"));
  // Hints in messages mention .contiguous(), .copy_() and .to(dtype); the code calls none.
  const std::string code = without_string_literals(text);
  EXPECT_TRUE(contains(text, ".contiguous()") && contains(text, ".copy_("));
  EXPECT_FALSE(contains(code, ".contiguous()"));
  EXPECT_FALSE(contains(code, ".to(at::"));
  EXPECT_FALSE(contains(code, "copy_("));
  EXPECT_FALSE(contains(text, "cudaMalloc"));
}

TEST(Codegen, TextDependsOnlyOnSignatureAndBackend) {
  const Signature a = parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor");
  const Signature b = parse_signature("axpy( Tensor x,Tensor y , float alpha )->Tensor");
  EXPECT_EQ(generate_binding(a, "cpu", "ns"), generate_binding(b, "cpu", "ns"));
  EXPECT_NE(generate_binding(a, "cpu", "ns"), generate_binding(a, "cuda", "ns"));
}

TEST(Codegen, PythonOnlyThroughTheFastEntry) {
  const std::string text =
      generate_binding(parse_signature("f(Tensor x) -> Tensor"), "cuda", "ns");
  EXPECT_TRUE(contains(text, "#include <torch/csrc/autograd/python_variable.h>"));
  EXPECT_FALSE(contains(text, "torch/extension.h"));
  EXPECT_FALSE(contains(text, "PYBIND11_MODULE"));
}

TEST(Codegen, FastEntryConvertsPlainArgumentsAndCallsCallDirectly) {
  const std::string text = generate_binding(
      parse_signature("ln(Tensor x, Tensor? b, float eps=1e-05, int k=1, bool f=False) -> (Tensor y, Tensor m)"),
      "cpu", "ns");
  EXPECT_TRUE(contains(text, "extern \"C\" PyObject* kreg_fast_entry(int64_t table)"));
  EXPECT_TRUE(contains(text, "if (nargs != 5 || !plain_context()) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "if (!plain_tensor(args[0])) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "if (args[1] != Py_None) {"));
  EXPECT_TRUE(contains(text, "if (!as_double(args[2], eps)) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "if (!as_int64(args[3], k)) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "if (!as_bool(args[4], f)) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "result = call(x, b, eps, k, f, kreg_table);"));
  EXPECT_TRUE(contains(text, "PyTuple_SET_ITEM(tuple, 1, out1);"));
  EXPECT_TRUE(contains(text, "pybind11::gil_scoped_release"));
}

TEST(Codegen, AnInPlaceFastEntryBumpsTheWrittenTensorsVersion) {
  const std::string text = generate_binding(parse_signature("s(Tensor(a!) x, Tensor y, float a) -> ()"), "cpu", "ns");
  EXPECT_TRUE(contains(text, "call(x, y, a, kreg_table);"));
  EXPECT_TRUE(contains(text, "if (!x.is_inference()) x.unsafeGetTensorImpl()->bump_version();"));
  EXPECT_FALSE(contains(text, "y.unsafeGetTensorImpl()->bump_version()"));
}

TEST(Codegen, NoFastEntryForListsOrScalarTypes) {
  for (const char* sig : {"f(Tensor x, int[] dims) -> Tensor", "g(Tensor x, ScalarType? t=None) -> Tensor"}) {
    const std::string text = generate_binding(parse_signature(sig), "cpu", "ns");
    EXPECT_TRUE(contains(text, "PyObject* kreg_fast_entry(int64_t /*table*/) { Py_RETURN_NONE; }")) << sig;
    EXPECT_FALSE(contains(text, "fast_call")) << sig;
  }
}

TEST(Codegen, RejectsUnknownBackend) {
  EXPECT_THROW(generate_binding(parse_signature("f(Tensor x) -> Tensor"), "rocm", "ns"),
               std::invalid_argument);
}

}  // namespace
}  // namespace kreg
