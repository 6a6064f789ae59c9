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

TEST(Codegen, TheSchemaIsPositionalWithATableArgument) {
  EXPECT_EQ(binding_schema(parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor")),
            "call(Tensor x, Tensor y, float alpha, int kreg_table) -> Tensor");
  // Positional and without defaults: registry/op.py passes every argument.
  EXPECT_EQ(binding_schema(parse_signature("ln(Tensor x, Tensor? b, float eps=1e-05, *, int k=0) -> (Tensor y, Tensor m)")),
            "call(Tensor x, Tensor? b, float eps, int k, int kreg_table) -> (Tensor, Tensor)");
  EXPECT_EQ(binding_schema(parse_signature("scale_(Tensor(a!) x, float a) -> ()")),
            "call(Tensor(a!) x, float a, int kreg_table) -> ()");
  EXPECT_THROW(binding_schema(parse_signature("f(int k) -> Tensor")), std::invalid_argument);
}

TEST(Codegen, OneTextPerBackendNamesNoSignature) {
  const std::string cpu = generate_shared_binding("cpu");
  EXPECT_EQ(cpu, generate_shared_binding("cpu"));
  EXPECT_NE(cpu, generate_shared_binding("cuda"));
  // The schema is registered at run time, for any namespace.
  EXPECT_TRUE(contains(cpu, "extern \"C\" const char* kreg_define(const char* ns, const char* schema)"));
  EXPECT_TRUE(contains(cpu, "torch::CppFunction::makeFromBoxedFunction<&boxed_call>()"));
  EXPECT_FALSE(contains(cpu, "TORCH_LIBRARY("));
}

TEST(Codegen, ReadsArgumentsByTheTablesKinds) {
  const std::string text = generate_shared_binding("cpu");
  for (const char* part : {"case 'T': a.tensors[i] = &v.toTensor(); break;", "case 'f': values[i].f64 = v.toDouble(); break;",
                           "a.lists[i] = v.toIntVector();", "code_of(table, v.toScalarType(), table.arg_names[i])",
                           "check_tensors(table, a.tensors, table.arg_names, table.arg_count, table.first_tensor, &slot,"}) {
    EXPECT_TRUE(contains(text, part)) << part;
  }
  // The kernel library's entry spreads the values; a float64 launcher is called wide.
  EXPECT_TRUE(contains(text, "const int wide = slot == kFloat64Slot;"));
  EXPECT_TRUE(contains(text, "constexpr int kFloat64Slot = 3;"));
  EXPECT_TRUE(contains(text, "reinterpret_cast<kreg_entry_fn>(const_cast<void*>(table.entry))(launcher, a.values, stream, wide)"));
  EXPECT_TRUE(contains(text, "c10::ScalarType::Float8_e4m3fn"));  // the dtype table, every entry
}

TEST(Codegen, CudaBindingUsesTheCurrentStreamOfTheInputsDevice) {
  const std::string cuda = generate_shared_binding("cuda");
  EXPECT_TRUE(contains(cuda, "c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(first.device()).native_handle()"));
  EXPECT_TRUE(contains(cuda, "c10::DeviceGuard device_guard(first.device())"));
  EXPECT_TRUE(contains(cuda, "t.is_cuda()"));
  EXPECT_FALSE(contains(cuda, "c10/cuda"));  // no CUDA header: builds from the wheels alone
  const std::string cpu = generate_shared_binding("cpu");
  EXPECT_FALSE(contains(cpu, "getStream"));
  EXPECT_FALSE(contains(cpu, "c10/cuda"));
  EXPECT_TRUE(contains(cpu, "t.is_cpu()"));
}

TEST(Codegen, AllocatesThroughPyTorchAndNeverCopies) {
  const std::string text = generate_shared_binding("cuda");
  EXPECT_TRUE(contains(text, "outs.push_back(allocate(table, k, a.tensors, first));"));
  // From the allocator torch's CUDA ops use, without a dispatcher call; at::empty
  // where torch fills new memory (deterministic algorithms).
  EXPECT_TRUE(contains(text, "at::detail::getCUDAHooks().getCUDADeviceAllocator()"));
  EXPECT_TRUE(contains(text, "deterministicFillUninitializedMemory()"));
  EXPECT_TRUE(contains(text, "return at::empty(shape, first.options().dtype(dtype));"));
  const std::string cpu = generate_shared_binding("cpu");
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

TEST(Codegen, PythonOnlyThroughTheFastEntry) {
  const std::string text = generate_shared_binding("cuda");
  EXPECT_TRUE(contains(text, "#include <torch/csrc/autograd/python_variable.h>"));
  EXPECT_FALSE(contains(text, "torch/extension.h"));
  EXPECT_FALSE(contains(text, "PYBIND11_MODULE"));
}

TEST(Codegen, TheFastEntryConvertsPlainArgumentsAndBumpsWrittenVersions) {
  const std::string text = generate_shared_binding("cpu");
  EXPECT_TRUE(contains(text, "extern \"C\" PyObject* kreg_fast_entry(int64_t address)"));
  EXPECT_TRUE(contains(text, "if (nargs != table.arg_count || !plain_context()) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "if (!as_double(object, values[i].f64)) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "pybind11::gil_scoped_release"));
  EXPECT_TRUE(contains(text, "a.tensors[i]->unsafeGetTensorImpl()->bump_version();"));
  // int[], ScalarType? and an optional Tensor(a!) take the dispatcher.
  EXPECT_TRUE(contains(text, "if (kind == 'l' || kind == 's' || (kind == 'O' && ((table.mutated_mask >> i) & 1u))) return false;"));
}

TEST(Codegen, RejectsUnknownBackend) {
  EXPECT_THROW(generate_shared_binding("rocm"), std::invalid_argument);
}

}  // namespace
}  // namespace kreg
