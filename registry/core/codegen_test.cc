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
  // The schema is registered at run time, for any namespace, through the stable C shims.
  EXPECT_TRUE(contains(cpu, "extern \"C\" const char* kreg_define(const char* ns, const char* schema)"));
  EXPECT_TRUE(contains(cpu, "torch_library_impl(impl, \"call\", &boxed_call, TORCH_ABI_VERSION)"));
  EXPECT_FALSE(contains(cpu, "TORCH_LIBRARY("));
}

TEST(Codegen, ReadsArgumentsByTheTablesKinds) {
  const std::string text = generate_shared_binding("cpu");
  for (const char* part : {"case 'T': tensors[i] = to<torch::stable::Tensor>(stack[i]); break;",
                           "case 'f': values[i].f64 = to<double>(stack[i]); break;",
                           "lists[i] = to<std::vector<int64_t>>(stack[i]);",
                           "dtypes[i] = to<std::optional<torch::headeronly::ScalarType>>(stack[i]);",
                           "check_tensors(table, a.tensors, table.arg_names, table.arg_count, table.first_tensor, &slot,"}) {
    EXPECT_TRUE(contains(text, part)) << part;
  }
  // The kernel library's entry spreads the values; a float64 launcher is called wide.
  EXPECT_TRUE(contains(text, "const int wide = slot == kFloat64Slot;"));
  EXPECT_TRUE(contains(text, "constexpr int kFloat64Slot = 3;"));
  EXPECT_TRUE(contains(text, "reinterpret_cast<kreg_entry_fn>(const_cast<void*>(table.entry))(launcher, a.values, stream, wide)"));
  EXPECT_TRUE(contains(text, "&aoti_torch_dtype_float8_e4m3fn"));  // the dtype table, every entry
  EXPECT_TRUE(contains(text, "\"Float8_e4m3fn\""));
}

TEST(Codegen, CudaBindingUsesTheCurrentStreamOfTheInputsDevice) {
  const std::string cuda = generate_shared_binding("cuda");
  EXPECT_TRUE(contains(cuda, "aoti_torch_get_current_cuda_stream(first.device_index, &stream)"));
  EXPECT_TRUE(contains(cuda, "aoti_torch_create_device_guard(first.device_index, &handle)"));
  EXPECT_TRUE(contains(cuda, "const DeviceGuard device_guard(first);"));
  EXPECT_TRUE(contains(cuda, "t.device_type == cuda_type()"));
  EXPECT_FALSE(contains(cuda, "cuda_runtime"));  // no CUDA header: builds from the wheels alone
  const std::string cpu = generate_shared_binding("cpu");
  EXPECT_FALSE(contains(cpu, "aoti_torch_get_current_cuda_stream"));
  EXPECT_TRUE(contains(cpu, "t.device_type == cpu_type()"));
}

TEST(Codegen, AllocatesThroughPyTorchAndNeverCopies) {
  const std::string text = generate_shared_binding("cuda");
  EXPECT_TRUE(contains(text, "outs[k] = allocate(table, k, a.tensors, first, fill, raw);"));
  // From the device's allocator through the shim, without a dispatcher call;
  // the dispatcher's aten::empty where torch fills new memory (deterministic algorithms).
  EXPECT_TRUE(contains(text, "aoti_torch_empty_strided(alloc_ndim, alloc_shape, alloc_strides, dtype"));
  EXPECT_TRUE(contains(text, "torch::stable::empty("));
  EXPECT_TRUE(contains(text, "python_true(python.fill_memory)"));
  EXPECT_FALSE(contains(text, "torch_from_blob("));
  const std::string cpu = generate_shared_binding("cpu");
  EXPECT_TRUE(contains(cpu, "torch_from_blob("));  // an isolated op's pooled output
  // Hints in messages mention .contiguous(), .copy_() and .to(dtype); the code calls none.
  const std::string code = without_string_literals(text);
  EXPECT_TRUE(contains(text, ".contiguous()") && contains(text, ".copy_("));
  EXPECT_FALSE(contains(code, ".contiguous()"));
  EXPECT_FALSE(contains(code, ".to(at::"));
  EXPECT_FALSE(contains(code, "copy_("));
  EXPECT_FALSE(contains(text, "cudaMalloc"));
}

TEST(Codegen, OnlyTorchsStableAbiAndPythonsLimitedApi) {
  for (const char* backend : {"cpu", "cuda"}) {
    const std::string text = generate_shared_binding(backend);
    EXPECT_TRUE(contains(text, "#define TORCH_TARGET_VERSION (((0ULL + 2) << 56) | ((0ULL + 11) << 48))"));
    EXPECT_TRUE(contains(text, "#define Py_LIMITED_API 0x030A0000"));
    EXPECT_TRUE(contains(text, "#include <torch/csrc/stable/library.h>"));
    for (const char* banned : {"#include <ATen", "#include <c10", "torch/library.h", "torch/extension.h",
                               "torch/csrc/autograd", "PYBIND11", "pybind11", "THPVariable"}) {
      EXPECT_FALSE(contains(text, banned)) << backend << ": " << banned;
    }
  }
}

TEST(Codegen, TheFastEntryConvertsPlainArgumentsAndBumpsWrittenVersions) {
  const std::string text = generate_shared_binding("cpu");
  EXPECT_TRUE(contains(text, "extern \"C\" PyObject* kreg_fast_entry(int64_t address)"));
  EXPECT_TRUE(contains(text, "extern \"C\" int kreg_init(PyObject* config)"));
  EXPECT_TRUE(contains(text, "if (nargs != table.arg_count || !plain_context()) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "if (!as_double(object, values[i].f64)) Py_RETURN_NOTIMPLEMENTED;"));
  EXPECT_TRUE(contains(text, "dlpack()->dltensor_from_py_object_no_sync(object, &dt)"));
  EXPECT_TRUE(contains(text, "const WithoutGil no_gil;"));
  EXPECT_TRUE(contains(text, "if (((table.mutated_mask >> i) & 1u) && !bump_version(args[i])) return nullptr;"));
  EXPECT_TRUE(contains(text, "PyObject* done = python.increment_version(one);"));
  // torch's flag functions through their C function where they are plain builtins.
  EXPECT_TRUE(contains(text, "python.increment_version.bind(increment_version, 1);"));
  EXPECT_TRUE(contains(text, "direct = PyCFunction_GetFunction(function);"));
  // int[], ScalarType? and an optional Tensor(a!) take the dispatcher.
  EXPECT_TRUE(contains(text, "if (kind == 'l' || kind == 's' || (kind == 'O' && ((table.mutated_mask >> i) & 1u))) return false;"));
}

TEST(Codegen, RejectsUnknownBackend) {
  EXPECT_THROW(generate_shared_binding("rocm"), std::invalid_argument);
}

}  // namespace
}  // namespace kreg
