#include "launcher_header.h"

#include <gtest/gtest.h>

namespace kreg {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

OpSpec op(const std::string& signature, std::vector<std::string> dtypes) {
  OpSpec spec;
  spec.signature = parse_signature(signature);
  spec.dtypes = std::move(dtypes);
  spec.launcher = spec.signature.name;
  return spec;
}

const OpSpec kAxpy = op("axpy(Tensor x, Tensor y, float alpha) -> Tensor", {"float32", "float16"});
// The one message explain_launcher_mismatch draws from a compiler's `output`
// on axpy's sources (`excerpts`); "" (a failure) for any other count.
std::string explained(const std::string& output, const std::vector<std::string>& excerpts = {},
                      const OpSpec& spec = kAxpy) {
  const std::vector<std::string> messages = explain_launcher_mismatch({spec}, output, excerpts);
  EXPECT_EQ(messages.size(), 1u) << output;
  return messages.size() == 1 ? messages[0] : "";
}

const OpSpec kNorm = op("ln(Tensor x, Tensor? b, int[] dims, ScalarType? t, bool f, int k) -> (Tensor y, Tensor mean)",
                        {"bfloat16"});

TEST(LauncherHeader, OnePrototypePerOpAndDtypeWithNames) {
  const std::string text = generate_launcher_header("demo", {kAxpy, kNorm});
  EXPECT_TRUE(contains(text, "#include \"kreg/abi.h\""));
  EXPECT_TRUE(contains(text, "KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y, "
                             "float alpha, void* stream);"));
  EXPECT_TRUE(contains(text, "KREG_API const char* axpy_f16("));
  EXPECT_TRUE(contains(text, "KREG_API const char* ln_bf16(kreg_tensor y, kreg_tensor mean, kreg_tensor x, "
                             "kreg_tensor b, kreg_int_list dims, int32_t t, bool f, int64_t k, void* stream);"));
  EXPECT_TRUE(contains(text, "// axpy(Tensor x, Tensor y, float alpha) -> Tensor"));
  EXPECT_EQ(required_launchers({kAxpy, kNorm}), (std::vector<std::string>{"axpy_f32", "axpy_f16", "ln_bf16"}));
}

TEST(LauncherHeader, AFloat64LauncherTakesFloatArgumentsAsDouble) {
  const std::string text = generate_launcher_header("demo", {op("axpy(Tensor x, Tensor y, float alpha) -> Tensor",
                                                                {"float32", "float64"})});
  EXPECT_TRUE(contains(text, "axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void* stream);"));
  EXPECT_TRUE(contains(text, "axpy_f64(kreg_tensor out, kreg_tensor x, kreg_tensor y, double alpha, void* stream);"));
  EXPECT_EQ(scalar_c_type("float64"), "double");
  EXPECT_EQ(scalar_c_type("bfloat16"), "float");
  // A float64 launcher written with float is the mismatch, and is named so.
  const OpSpec wide = op("axpy(Tensor x, Tensor y, float alpha) -> Tensor", {"float64"});
  const std::string message = explained("a.cpp:3:22: error: conflicting declaration of C function 'const char* "
                                        "axpy_f64(kreg_tensor, kreg_tensor, kreg_tensor, float, void*)'\n",
                                        {}, wide);
  EXPECT_TRUE(contains(message, "parameter 4 (float alpha) must be double but the launcher takes float")) << message;
}

// The op entries spread the shared binding's values into the typed launcher.
TEST(LauncherHeader, EachOpHasAnEntryThatCallsItsLauncherTyped) {
  const std::string text = generate_launcher_header("demo", {kAxpy, kNorm});
  EXPECT_EQ(entry_symbol(kAxpy), "kreg_entry__axpy");
  EXPECT_TRUE(contains(text, "KREG_API __attribute__((weak)) const char* kreg_entry__axpy(const void* launcher, "
                             "const kreg_value* values, "
                             "void* stream, int32_t wide) {"));
  // A float argument: narrowed for all but a float64 launcher, which is called wide.
  EXPECT_TRUE(contains(text, "if (wide) return ((const char* (*)(kreg_tensor, kreg_tensor, kreg_tensor, "
                             "double, void*))launcher)(values[0].tensor, values[1].tensor, "
                             "values[2].tensor, values[3].f64, stream);"))
      << text;
  EXPECT_TRUE(contains(text, "(float)values[3].f64, stream);"));
  // Every other kind, and no float: one call.
  EXPECT_TRUE(contains(text, "(values[0].tensor, values[1].tensor, values[2].tensor, values[3].tensor, "
                             "values[4].list, values[5].dtype, values[6].b, values[7].i64, stream);"))
      << text;
  EXPECT_TRUE(contains(text, "  (void)wide;\n"));
}

// What g++ prints for a launcher taking double where the signature says float.
TEST(LauncherHeader, ExplainsAWrongScalarTypeFromGccOutput) {
  const std::string gcc =
      "axpy_cpu.cpp:20:13: error: conflicting declaration of C function 'const char* axpy_f32(kreg_tensor, "
      "kreg_tensor, kreg_tensor, double, void*)'\n"
      "kreg_launchers.h:8:22: note: previous declaration 'const char* axpy_f32(kreg_tensor, kreg_tensor, "
      "kreg_tensor, float, void*)'\n";
  const std::string message = explained(gcc);
  EXPECT_TRUE(contains(message, "op axpy, launcher axpy_f32: parameter 4 (float alpha) must be float but "
                                "the launcher takes double"))
      << message;
}

// nvcc's front end names only the prototype; the definition comes from the source excerpt.
TEST(LauncherHeader, ExplainsPointerConstnessAndCountFromExcerpts) {
  const std::string nvcc =
      "axpy.cu(12): error: declaration is incompatible with \"const char *axpy_f32(kreg_tensor, kreg_tensor, "
      "kreg_tensor, float, void *)\" (declared at line 8 of \"kreg_launchers.h\")\n";
  std::string message = explained(nvcc, {"KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, "
                                          "kreg_tensor y, float alpha, const void* stream) {\n  return nullptr;\n}"});
  EXPECT_TRUE(contains(message, "parameter 5 (the stream) must be void* but the launcher takes const void*"))
      << message;

  message = explained(nvcc, {"KREG_API const char* axpy_f32(float* out, const float* x, const float* y, float a) {"});
  EXPECT_TRUE(contains(message, "it takes 4 parameters but the signature axpy(Tensor x, Tensor y, float alpha) "
                                "-> Tensor needs (kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, "
                                "void* stream)"))
      << message;
}

// nvcc (CUDA 12/13) on a launcher that differs from its prototype in a
// parameter type: it takes the two as overloads, and says only this.
TEST(LauncherHeader, ExplainsNvccsOverloadedCLinkageError) {
  const std::string nvcc =
      "axpy.cu(2): error: more than one instance of overloaded function \"axpy_f32\" has \"C\" linkage\n"
      "  extern \"C\" __attribute__((visibility(\"default\"))) const char* axpy_f32(kreg_tensor out, kreg_tensor x, "
      "kreg_tensor y, double alpha, void* stream) {\n";
  const std::string message = explained(nvcc);
  EXPECT_TRUE(contains(message, "op axpy, launcher axpy_f32: parameter 4 (float alpha) must be float but the "
                                "launcher takes double"))
      << message;
}

TEST(LauncherHeader, ClangConflictingTypesWithoutExcerptStillNamesThePrototype) {
  const std::string message = explained("a.cpp:3:13: error: conflicting types for 'axpy_f16'\n");
  EXPECT_TRUE(contains(message, "launcher axpy_f16: its definition does not match")) << message;
}

TEST(LauncherHeader, NothingToExplainInOtherErrors) {
  EXPECT_TRUE(explain_launcher_mismatch({kAxpy}, "a.cpp:3:1: error: expected ';' before '}' token\n", {}).empty());
}

TEST(LauncherHeader, MissingLaunchersNameTheDtypeAndThePrototype) {
  const auto messages = missing_launchers("demo", {kAxpy}, {"axpy_f32", "other"});
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_TRUE(contains(messages[0], "kernel demo, op axpy: no launcher for float16; define KREG_API const char* "
                                    "axpy_f16(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void* "
                                    "stream)"))
      << messages[0];
  EXPECT_TRUE(contains(messages[0], "remove float16 from the op's dtypes"));
}

}  // namespace
}  // namespace kreg
