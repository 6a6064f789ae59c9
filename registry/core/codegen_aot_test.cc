#include "codegen_aot.h"

#include <gtest/gtest.h>

#include "codegen.h"
#include "signature.h"

namespace kreg {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

OpSpec op(const std::string& signature, std::vector<std::string> dtypes = {"float32"},
          std::vector<std::string> same_shape = {}, std::string launcher = "") {
  OpSpec spec;
  spec.signature = parse_signature(signature);
  spec.dtypes = std::move(dtypes);
  spec.launcher = launcher.empty() ? spec.signature.name : launcher;
  spec.same_shape = std::move(same_shape);
  return spec;
}

const OpSpec kAxpy = op("axpy(Tensor x, Tensor y, float alpha) -> Tensor",
                        {"float32", "float16", "bfloat16"}, {"x", "y"});

TEST(CodegenAot, DefUnitDefinesEveryOpInOneLibraryBlock) {
  const std::string text =
      generate_aot_def("axpy", {kAxpy, op("scale(Tensor x, int k, bool b) -> Tensor")}, "_C");
  EXPECT_EQ(count(text, "TORCH_LIBRARY("), 1u);  // a namespace may be defined once per process
  EXPECT_TRUE(contains(text, "TORCH_LIBRARY(axpy, m) {\n"));
  EXPECT_TRUE(contains(text, "m.def(\"axpy(Tensor x, Tensor y, float alpha) -> Tensor\");"));
  EXPECT_TRUE(contains(text, "m.def(\"scale(Tensor x, int k, bool b) -> Tensor\");"));
  EXPECT_FALSE(contains(text, "TORCH_LIBRARY_IMPL"));
  EXPECT_FALSE(contains(text, "kreg_table"));
  EXPECT_TRUE(contains(text, "PyMODINIT_FUNC PyInit__C(void)"));
  EXPECT_EQ(text.find("#include <Python.h>"), text.find("#include"));  // Python.h first
}

TEST(CodegenAot, ImplUnitDeclaresHiddenLaunchersAndRegistersTheBackendKey) {
  const std::string text = generate_aot_impl("axpy", {kAxpy}, "cpu", "_C_cpu");
  for (const char* suffix : {"f32", "f16", "bf16"}) {
    EXPECT_TRUE(contains(text, std::string("extern \"C\" __attribute__((visibility(\"hidden\"))) const char* axpy_") +
                                   suffix + "(kreg_tensor, kreg_tensor, kreg_tensor, float, void*);"))
        << suffix;
  }
  EXPECT_FALSE(contains(text, "axpy_f64"));
  EXPECT_TRUE(contains(text, "TORCH_LIBRARY_IMPL(axpy, CPU, m) {\n  m.impl(\"axpy\", &axpy_cpu);\n}"));
  EXPECT_FALSE(contains(text, "TORCH_LIBRARY(axpy"));  // the def unit's job
  EXPECT_FALSE(contains(text, "CUDA"));
  EXPECT_TRUE(contains(text, "at::Tensor axpy_cpu(const at::Tensor& x, const at::Tensor& y, double alpha) {"));
  EXPECT_TRUE(contains(text, "PyMODINIT_FUNC PyInit__C_cpu(void)"));
  // No run-time table: no lookup, no table argument.
  EXPECT_FALSE(contains(text, "table_at"));
  EXPECT_FALSE(contains(text, "kreg_table"));
}

TEST(CodegenAot, TableHoldsLaunchersInDtypeSlotOrderAndTheSameShapeMask) {
  const std::string axpy = generate_aot_impl("axpy", {kAxpy}, "cpu", "_C_cpu");
  EXPECT_TRUE(contains(axpy, "{kTableMagic, \"axpy.axpy\", \"float32, float16, bfloat16\", 3ull,"));
  EXPECT_TRUE(contains(axpy, "{reinterpret_cast<void*>(&axpy_f32), reinterpret_cast<void*>(&axpy_f16), "
                             "reinterpret_cast<void*>(&axpy_bf16), nullptr, nullptr, nullptr, nullptr, nullptr, "
                             "nullptr, nullptr, nullptr, nullptr}};"));
  // arg_dtypes, then the output declaration: like x (dtype of argument 0, all of its dims).
  EXPECT_TRUE(contains(axpy, "{-1, -1, -1},\n   {{-1, 0, 1, 0, {{2, 0, 0LL, INT64_MAX}}}}"));

  const std::string f = generate_aot_impl(
      "k", {op("f(Tensor a, int n, Tensor b, Tensor c) -> Tensor", {"float64"}, {"a", "c"}, "f_impl")}, "cpu",
      "_C_cpu");
  EXPECT_TRUE(contains(f, "\"k.f\", \"float64\", 9ull,"));  // arguments 0 and 3
  EXPECT_TRUE(contains(f, "{nullptr, nullptr, nullptr, reinterpret_cast<void*>(&f_impl_f64), nullptr, nullptr, "
                          "nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}};"));
  EXPECT_TRUE(contains(f, "f_impl_f64(kreg_tensor, kreg_tensor, int64_t, kreg_tensor, kreg_tensor, void*);"));
}

TEST(CodegenAot, CudaImplUsesTheCurrentStreamOfTheInputsDevice) {
  const std::string text = generate_aot_impl("axpy", {kAxpy}, "cuda", "_C_cuda");
  EXPECT_FALSE(contains(text, "c10/cuda"));  // no CUDA header: builds from the wheels alone
  EXPECT_TRUE(contains(text, "c10::DeviceGuard device_guard(x.device())"));
  EXPECT_TRUE(contains(text, "c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(x.device()).native_handle()"));
  EXPECT_TRUE(contains(text, "t.is_cuda()"));
  EXPECT_TRUE(contains(text, "TORCH_LIBRARY_IMPL(axpy, CUDA, m) {\n  m.impl(\"axpy\", &axpy_cuda);\n}"));
  EXPECT_TRUE(contains(text, "PyMODINIT_FUNC PyInit__C_cuda(void)"));
}

// The checks and allocation are the shared binding's text, not a copy that can drift.
// The AOT units stay on ATen (binding_text.cc) while the JIT binding is on
// torch's stable ABI (stable_binding_text.cc): their checks must still say
// the same, word for word.
TEST(CodegenAot, TheChecksSayWhatTheSharedBindingsSay) {
  for (const char* backend : {"cpu", "cuda"}) {
    const std::string jit = generate_shared_binding(backend);
    const std::string aot = generate_aot_impl("axpy", {kAxpy}, backend, "_C_x");
    for (const char* said : {"' is an undefined tensor\"", " but this build of the op runs on ",
                             "; move it with .c", "(the op never copies implicitly)", "; put all tensors on one device",
                             "; convert it with .to(dtype) (the op never converts implicitly)",
                             "; convert one of them with .to(dtype) (the op never converts implicitly)",
                             "' is not contiguous (sizes ", "); pass .contiguous() (the op never copies implicitly)",
                             ") and is written in place: a .contiguous() copy passed instead ",
                             "' has shape ", ": no launcher in the table", " is not supported; the manifest lists ",
                             " dims (shape ", ": the launcher failed: "}) {
      EXPECT_TRUE(contains(jit, said)) << backend << ": " << said;
      EXPECT_TRUE(contains(aot, said)) << backend << ": " << said;
    }
  }
}

TEST(CodegenAot, SeveralOpsGetOneRegistrationBlock) {
  const std::string text =
      generate_aot_impl("k", {kAxpy, op("g(Tensor x) -> Tensor", {"float32"}, {"x"})}, "cpu", "_C_cpu");
  EXPECT_EQ(count(text, "TORCH_LIBRARY_IMPL("), 1u);
  EXPECT_TRUE(contains(text, "  m.impl(\"axpy\", &axpy_cpu);\n  m.impl(\"g\", &g_cpu);\n"));
  EXPECT_TRUE(contains(text, "using g_launcher = const char* (*)(kreg_tensor, kreg_tensor, void*);"));
}

TEST(CodegenAot, RejectsWhatWouldNotCompileOrRegister) {
  EXPECT_THROW(generate_aot_impl("axpy", {kAxpy}, "rocm", "_C"), std::invalid_argument);
  EXPECT_THROW(generate_aot_def("Bad-Name", {kAxpy}, "_C"), std::invalid_argument);
  EXPECT_THROW(generate_aot_def("axpy", {kAxpy}, "_C.cpu"), std::invalid_argument);
  EXPECT_THROW(generate_aot_def("axpy", {}, "_C"), std::invalid_argument);
  EXPECT_THROW(generate_aot_def("axpy", {kAxpy, kAxpy}, "_C"), std::invalid_argument);
  EXPECT_THROW(generate_aot_impl("axpy", {op("f(Tensor x) -> Tensor", {"complex64"})}, "cpu", "_C"),
               std::invalid_argument);
  EXPECT_THROW(generate_aot_impl("axpy", {op("f(Tensor x) -> Tensor", {})}, "cpu", "_C"), std::invalid_argument);
  EXPECT_THROW(generate_aot_impl("axpy", {op("f(Tensor x, int n) -> Tensor", {"float32"}, {"n"})}, "cpu", "_C"),
               std::invalid_argument);
}

TEST(CodegenAot, NoPybindAndNoTorchExtensionHeader) {
  // Python.h is only for PyInit; pybind11 and torch/extension.h would cost seconds per unit.
  for (const std::string& text : {generate_aot_def("axpy", {kAxpy}, "_C"),
                                  generate_aot_impl("axpy", {kAxpy}, "cuda", "_C_cuda")}) {
    EXPECT_FALSE(contains(text, "pybind11"));
    EXPECT_FALSE(contains(text, "torch/extension.h"));
  }
}

}  // namespace
}  // namespace kreg
