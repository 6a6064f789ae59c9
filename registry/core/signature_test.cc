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

// The message `c.text` is rejected with, checked against `c.expect`; "" where
// it was accepted (a failure already).
std::string rejection(const BadSignature& c) {
  try {
    parse_signature(c.text);
  } catch (const SignatureError& e) {
    EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
        << "for \"" << c.text << "\": got \"" << e.what() << "\", want \"" << c.expect << "\"";
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << c.text;
  return "";
}

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
      {"axpy(double x) -> Tensor", "argument type \"double\" is not supported at column 6"},
      {"axpy(tensor x) -> Tensor", "argument type \"tensor\" is not supported"},
      {"axpy(Tensor) -> Tensor", "expected a space and an argument name"},
      {"axpy(Tensor 1x) -> Tensor", "expected argument name at column 13"},
      {"axpy(Tensor x-y) -> Tensor", "expected ')' or ','"},
      {"axpy(Tensor x, Tensor x) -> Tensor", "duplicate argument name \"x\" at column 23"},
      {"axpy(Tensor x)", "expected '->'"},
      {"axpy(Tensor x) ->", "expected a return type"},
      {"axpy(Tensor x) -> float", "return type \"float\" is not supported at column 19"},
      {"axpy(Tensor x) -> Tensor Tensor", "return name \"Tensor\" is a type name at column 26"},
      {"axpy(Tensor x) -> Tensor y z", "expected end of signature at column 28"},
      {"axpy(Tensor x) -> Tensor;", "expected end of signature"},
      {"axpy(Tensor x) -> (Tensor, float)", "return type \"float\" is not supported"},
      {"axpy(Tensor x) -> Tensor(a!)", "return type \"Tensor(...)\" is not supported"},
      {"axpy(Tensor? x) -> Tensor", "needs at least one Tensor argument that is not optional"},
      {"axpy() -> Tensor", "needs at least one Tensor argument"},
      {"axpy(float a, int n) -> Tensor", "needs at least one Tensor argument"},
      {"axpy(Tensor float) -> Tensor", "C++ keyword"},
      {"int(Tensor x) -> Tensor", "C++ keyword"},
  };
  for (const BadSignature& c : cases) rejection(c);
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
  for (const char* name : {"table", "stream", "launcher", "kreg_table", "kreg_x"}) {
    const std::string text = std::string("f(Tensor x, float ") + name + ") -> Tensor";
    EXPECT_THROW(parse_signature(text), SignatureError) << text;
  }
  EXPECT_NO_THROW(parse_signature("f(Tensor x, float output) -> Tensor"));
}

// torch's out= convention: an argument named out keeps its schema, and an
// unnamed return then takes another name (both name launcher parameters).
TEST(SignatureReservedNames, OutIsAnArgumentNameAndUnnamedReturnsStepAside) {
  const Signature add = parse_signature("myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()");
  EXPECT_EQ(add.canonical(), "myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()");
  EXPECT_EQ(parse_signature("f(Tensor out) -> Tensor").returns[0].name, "result");
  const Signature two = parse_signature("f(Tensor out1, Tensor result1) -> (Tensor, Tensor)");
  EXPECT_EQ(two.returns[0].name, "out0");
  EXPECT_EQ(two.returns[1].name, "result_1");
}

}  // namespace
}  // namespace kreg

namespace kreg {
namespace {

TEST(SignatureLanguage, OptionalMutatedListsScalarTypesDefaultsAndKeywordOnly) {
  const Signature sig = parse_signature(
      "f(Tensor(a!) x, Tensor? bias, int[] dims, ScalarType? dtype=None, float eps=1e-06, *, bool flag=True, "
      "int k=-3, int[] pad=[1,  2]) -> ()");
  ASSERT_EQ(sig.args.size(), 8u);
  EXPECT_TRUE(sig.args[0].mutated);
  EXPECT_EQ(sig.args[0].alias, "a");
  EXPECT_EQ(sig.args[0].type_text(), "Tensor(a!)");
  EXPECT_TRUE(sig.args[1].optional);
  EXPECT_FALSE(sig.args[1].has_default);
  EXPECT_EQ(sig.args[2].type, ArgType::kIntList);
  EXPECT_EQ(sig.args[3].type, ArgType::kScalarType);
  EXPECT_EQ(sig.args[3].default_text, "None");
  EXPECT_EQ(sig.args[4].default_text, "1e-06");
  EXPECT_FALSE(sig.args[4].keyword_only);
  EXPECT_TRUE(sig.args[5].keyword_only);
  EXPECT_EQ(sig.args[5].default_text, "True");
  EXPECT_EQ(sig.args[6].default_text, "-3");
  EXPECT_EQ(sig.args[7].default_text, "[1, 2]");
  EXPECT_TRUE(sig.returns.empty());
  EXPECT_EQ(sig.first_tensor(), 0);
  EXPECT_EQ(sig.canonical(),
            "f(Tensor(a!) x, Tensor? bias, int[] dims, ScalarType? dtype=None, float eps=1e-06, *, bool flag=True, "
            "int k=-3, int[] pad=[1, 2]) -> ()");
  EXPECT_EQ(parse_signature(sig.canonical()).canonical(), sig.canonical());
}

TEST(SignatureLanguage, ReturnsOneATupleOrNothingNamedOrNot) {
  Signature one = parse_signature("f(Tensor x) -> Tensor");
  ASSERT_EQ(one.returns.size(), 1u);
  EXPECT_EQ(one.returns[0].name, "out");
  Signature two = parse_signature("f(Tensor x) -> (Tensor, Tensor)");
  EXPECT_EQ(two.returns[1].name, "out1");
  EXPECT_EQ(two.canonical(), "f(Tensor x) -> (Tensor, Tensor)");
  Signature named = parse_signature("ln(Tensor x, Tensor w, Tensor? b, float eps=1e-05) -> (Tensor y, Tensor mean, Tensor rstd)");
  EXPECT_EQ(named.returns[2].name, "rstd");
  EXPECT_EQ(named.find_return("mean"), 1);
  EXPECT_EQ(named.canonical(), "ln(Tensor x, Tensor w, Tensor? b, float eps=1e-05) -> (Tensor y, Tensor mean, Tensor rstd)");
  EXPECT_EQ(parse_signature("f(Tensor x) -> ( )").canonical(), "f(Tensor x) -> ()");
  EXPECT_EQ(parse_signature("f(Tensor x) -> Tensor y").canonical(), "f(Tensor x) -> Tensor y");
}

TEST(SignatureLanguage, UnsupportedConstructsSayWhatIsSupported) {
  const BadSignature cases[] = {
      {"f(Tensor x, Tensor[] xs) -> Tensor", "argument type \"Tensor[]\" is not supported"},
      {"f(Tensor x, float? s) -> Tensor", "argument type \"float?\" is not supported"},
      {"f(Tensor x, int? s) -> Tensor", "argument type \"int?\" is not supported"},
      {"f(Tensor x, Scalar s) -> Tensor", "argument type \"Scalar\" is not supported"},
      {"f(Tensor x, str s) -> Tensor", "argument type \"str\" is not supported"},
      {"f(Tensor(a) x) -> Tensor", "argument type \"Tensor(a)\" is not supported"},
      {"f(Tensor x, ScalarType t) -> Tensor", "not supported"},
      {"f(Tensor x, float[] s) -> Tensor", "argument type \"float[]\" is not supported"},
      {"f(Tensor x) -> Tensor[]", "return type \"Tensor[]\" is not supported"},
      {"f(Tensor x) -> int", "return type \"int\" is not supported"},
      {"f(Tensor x, float eps=abc) -> Tensor", "bad default for float eps"},
      {"f(Tensor x, int k=1.5) -> Tensor", "bad default for int k"},
      {"f(Tensor x, bool b=true) -> Tensor", "expected True or False"},
      {"f(Tensor x, Tensor? b=0) -> Tensor", "expected None"},
      {"f(Tensor x=None) -> Tensor", "a Tensor argument cannot have a default"},
      {"f(Tensor x, float a=1.0, float b) -> Tensor", "has no default but follows one that has"},
      {"f(Tensor(a!) x, Tensor(a!) y) -> ()", "alias \"a\" is used twice"},
      {"f(Tensor x, *) -> Tensor", "expected ',' after '*'"},
      {"f(Tensor x, *, *, int k) -> Tensor", "a second '*'"},
      {"f(Tensor x) -> (Tensor y, Tensor y)", "two returns are called \"y\""},
      {"f(Tensor x) -> Tensor x", "has the name of an argument"},
  };
  for (const BadSignature& c : cases) {
    const std::string message = rejection(c);
    if (!message.empty() && std::string(c.expect).find("is not supported") != std::string::npos &&
        std::string(c.expect).find("argument type") != std::string::npos) {
      EXPECT_NE(message.find(kSupportedArgTypes), std::string::npos) << message;
    }
  }
}

TEST(SignatureLanguage, KeywordOnlyArgumentsNeedNoDefault) {
  const Signature sig = parse_signature("f(Tensor x, float a=1.0, *, int k) -> Tensor");
  EXPECT_TRUE(sig.args[2].keyword_only);
  EXPECT_FALSE(sig.args[2].has_default);
}

}  // namespace
}  // namespace kreg
