#include "signature.h"

#include <gtest/gtest.h>

#include <string>

namespace kreg {
namespace {

TEST(SignatureTest, ParsesAxpy) {
  Signature sig = parse_signature("axpy(Tensor x, Tensor y, float alpha) -> Tensor");
  EXPECT_EQ(sig.name, "axpy");
  ASSERT_EQ(sig.args.size(), 3u);
  EXPECT_EQ(sig.args[0].type, ArgType::kTensor);
  EXPECT_EQ(sig.args[0].name, "x");
  EXPECT_EQ(sig.args[1].type, ArgType::kTensor);
  EXPECT_EQ(sig.args[1].name, "y");
  EXPECT_EQ(sig.args[2].type, ArgType::kFloat);
  EXPECT_EQ(sig.args[2].name, "alpha");
  EXPECT_EQ(sig.tensor_count(), 2);
  EXPECT_EQ(sig.canonical(), "axpy(Tensor x, Tensor y, float alpha) -> Tensor");
}

TEST(SignatureTest, AllArgumentTypes) {
  Signature sig = parse_signature("f(int n, Tensor t, bool flag, float s) -> Tensor");
  ASSERT_EQ(sig.args.size(), 4u);
  EXPECT_EQ(sig.args[0].type, ArgType::kInt);
  EXPECT_EQ(sig.args[1].type, ArgType::kTensor);
  EXPECT_EQ(sig.args[2].type, ArgType::kBool);
  EXPECT_EQ(sig.args[3].type, ArgType::kFloat);
  EXPECT_EQ(sig.tensor_count(), 1);
}

TEST(SignatureTest, WhitespaceTolerantAndCanonical) {
  Signature sig = parse_signature("  axpy ( Tensor\tx ,Tensor   y,\n float alpha )->Tensor  ");
  EXPECT_EQ(sig.canonical(), "axpy(Tensor x, Tensor y, float alpha) -> Tensor");
}

TEST(SignatureTest, CanonicalRoundTrips) {
  for (const char* text :
       {"relu(Tensor x) -> Tensor", "_k2(Tensor a_1, int n, bool b) -> Tensor"}) {
    Signature sig = parse_signature(text);
    EXPECT_EQ(sig.canonical(), text);
    EXPECT_EQ(parse_signature(sig.canonical()).canonical(), text);
  }
}

TEST(SignatureTest, ArgTypeNames) {
  EXPECT_STREQ(arg_type_name(ArgType::kTensor), "Tensor");
  EXPECT_STREQ(arg_type_name(ArgType::kFloat), "float");
  EXPECT_STREQ(arg_type_name(ArgType::kInt), "int");
  EXPECT_STREQ(arg_type_name(ArgType::kBool), "bool");
}

// Each bad signature must be rejected, with a message containing `expect`.
struct BadSignature {
  const char* text;
  const char* expect;
};


TEST(SignatureTest, RejectsBadInputs) {
  const BadSignature cases[] = {
      {"", "expected op name at column 1"},
      {"   ", "expected op name"},
      {"1abc(Tensor x) -> Tensor", "expected op name at column 1"},
      {"axpy", "expected '(' at column 5 (end of text)"},
      {"axpy Tensor x) -> Tensor", "expected '(' at column 6"},
      {"axpy(Tensor x, Tensor y, float alpha -> Tensor", "expected ')' or ','"},
      {"axpy(Tensor x Tensor y) -> Tensor", "expected ')' or ',' at column 15"},
      {"axpy(Tensor x,) -> Tensor", "expected an argument type"},
      {"axpy(double x) -> Tensor", "unknown argument type \"double\" at column 6"},
      {"axpy(tensor x) -> Tensor", "unknown argument type \"tensor\""},
      {"axpy(Tensor) -> Tensor", "expected a space and an argument name"},
      {"axpy(Tensor 1x) -> Tensor", "expected argument name at column 13"},
      {"axpy(Tensor x-y) -> Tensor", "expected ')' or ','"},
      {"axpy(Tensor x, Tensor x) -> Tensor", "duplicate argument name \"x\" at column 23"},
      {"axpy(Tensor x)", "expected '->'"},
      {"axpy(Tensor x) ->", "expected return type Tensor"},
      {"axpy(Tensor x) -> float", "expected return type Tensor at column 19"},
      {"axpy(Tensor x) -> Tensor Tensor", "expected end of signature at column 26"},
      {"axpy(Tensor x) -> Tensor;", "expected end of signature"},
      {"axpy(Tensor x) -> (Tensor, Tensor)", "expected return type Tensor"},
      {"axpy() -> Tensor", "needs at least one Tensor argument"},
      {"axpy(float a, int n) -> Tensor", "needs at least one Tensor argument"},
      {"axpy(Tensor float) -> Tensor", "C++ keyword"},
      {"int(Tensor x) -> Tensor", "C++ keyword"},
  };
  for (const BadSignature& c : cases) {
    try {
      parse_signature(c.text);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const SignatureError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
          << "for \"" << c.text << "\": got \"" << e.what() << "\", want \"" << c.expect << "\"";
    }
  }
}

TEST(SignatureTest, ErrorQuotesTheText) {
  try {
    parse_signature("axpy(Tensor x, Tensor y, float alpha -> Tensor");
    FAIL();
  } catch (const SignatureError& e) {
    EXPECT_STREQ(e.what(),
                 "expected ')' or ',' at column 38 in "
                 "\"axpy(Tensor x, Tensor y, float alpha -> Tensor\"");
  }
}

TEST(SignatureTest, ErrorIsInvalidArgument) {
  EXPECT_THROW(parse_signature("nope"), std::invalid_argument);
}

}  // namespace
}  // namespace kreg

namespace kreg {
namespace {

TEST(SignatureReservedNames, ArgumentsCannotShadowTheGeneratedBindingsLocals) {
  for (const char* name : {"out", "table", "stream", "launcher", "kreg_table", "kreg_x"}) {
    const std::string text = std::string("f(Tensor x, float ") + name + ") -> Tensor";
    EXPECT_THROW(parse_signature(text), SignatureError) << text;
  }
  EXPECT_NO_THROW(parse_signature("f(Tensor x, float output) -> Tensor"));
}

}  // namespace
}  // namespace kreg
