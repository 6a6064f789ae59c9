#include "output_spec.h"

#include <gtest/gtest.h>

#include "dtype.h"

namespace kreg {
namespace {

const Signature kSig = parse_signature("f(Tensor x, Tensor w, Tensor? b, float eps) -> (Tensor y, Tensor s)");

TEST(OutputSpec, LikeAnArgument) {
  const OutputSpec s = parse_output_spec("like  x", kSig, "y");
  EXPECT_EQ(s.text, "like x");
  EXPECT_EQ(s.dtype_code, -1);
  EXPECT_EQ(s.dtype_arg, 0);
  ASSERT_EQ(s.dims.size(), 1u);
  EXPECT_EQ(s.dims[0].kind, DimTerm::kSlice);
  EXPECT_EQ(s.dims[0].a, 0);
  EXPECT_EQ(s.dims[0].b, kSliceEnd);
}

TEST(OutputSpec, FixedDtypeAndSlices) {
  const OutputSpec s = parse_output_spec("float32[x.shape[:-1]]", kSig, "s");
  EXPECT_EQ(s.dtype_code, dtype_code("float32"));
  ASSERT_EQ(s.dims.size(), 1u);
  EXPECT_EQ(s.dims[0].a, 0);
  EXPECT_EQ(s.dims[0].b, -1);
  EXPECT_EQ(s.text, "float32[x.shape[:-1]]");
  const OutputSpec t = parse_output_spec("int64[ x.shape[1:], 4 ]", kSig, "s");
  ASSERT_EQ(t.dims.size(), 2u);
  EXPECT_EQ(t.dims[0].a, 1);
  EXPECT_EQ(t.dims[0].b, kSliceEnd);
  EXPECT_EQ(t.dims[1].kind, DimTerm::kConst);
  EXPECT_EQ(t.dims[1].a, 4);
  EXPECT_EQ(t.text, "int64[x.shape[1:], 4]");
}

TEST(OutputSpec, DtypeOfAnArgumentAndSizesOfTwo) {
  const OutputSpec s = parse_output_spec("x.dtype[x.size(0), w.size(-1)]", kSig, "y");
  EXPECT_EQ(s.dtype_arg, 0);
  ASSERT_EQ(s.dims.size(), 2u);
  EXPECT_EQ(s.dims[0].kind, DimTerm::kSize);
  EXPECT_EQ(s.dims[1].arg, 1);
  EXPECT_EQ(s.dims[1].a, -1);
  EXPECT_TRUE(parse_output_spec("float32[]", kSig, "s").dims.empty());
}

TEST(OutputSpec, ErrorsNameTheOutputAndWhatToWrite) {
  for (const auto& [text, expect] : std::vector<std::pair<std::string, std::string>>{
           {"like z", "\"z\" is not a Tensor argument of f"},
           {"like eps", "\"eps\" is not a Tensor argument"},
           {"like b", "\"b\" is optional"},
           {"float[x.shape]", "neither a dtype"},
           {"float32[x.shape[2]]", "expected a slice"},
           {"float32[x.numel()]", "expected x.shape"},
           {"float32[x.shape", "expected ',' or ']'"},
           {"float32[x.size(0)] extra", "unexpected text"},
       }) {
    try {
      parse_output_spec(text, kSig, "s");
      ADD_FAILURE() << "accepted " << text;
    } catch (const SignatureError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(expect), std::string::npos) << what;
      EXPECT_NE(what.find("output \"s\""), std::string::npos) << what;
      EXPECT_NE(what.find("like x"), std::string::npos) << what;  // the examples
    }
  }
}

TEST(OutputSpec, FakeFunctionIsPythonFromTheSameDeclarations) {
  const std::vector<OutputSpec> outs = {parse_output_spec("like x", kSig, "y"),
                                        parse_output_spec("float32[x.shape[:-1], w.size(0), 3]", kSig, "s")};
  EXPECT_EQ(fake_function(kSig, outs, "fake"),
            "def fake(x, w, b, eps):\n"
            "    for _name, _tensor in ((\"w\", w), (\"b\", b), ):\n"
            "        if _tensor is not None and _tensor.device != x.device:\n"
            "            raise RuntimeError(f\"f: argument '{_name}' is on {_tensor.device} but 'x' is on {x.device}; "
            "put all tensors on one device (meta tensors only with meta tensors)\")\n"
            "    return (torch.empty((*x.shape[:],), dtype=x.dtype, device=x.device), "
            "torch.empty((*x.shape[:-1], w.shape[0], 3), dtype=torch.float32, device=x.device))\n");
  const Signature inplace = parse_signature("s_(Tensor(a!) x, float a) -> ()");
  EXPECT_EQ(fake_function(inplace, {}, "g"), "def g(x, a):\n    return None\n");
}

TEST(OutputSpec, FakeFunctionHasTheSchemasDefaultsAndKeywordOnlyArguments) {
  const Signature sig = parse_signature(
      "rowstat(Tensor x, Tensor? w=None, float scale=2.0, *, int offset=0, bool flag=True, int[] dims=[0, 1]) -> Tensor");
  const std::string text = fake_function(sig, {parse_output_spec("like x", sig, "out")}, "fake");
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "def fake(x, w=None, scale=2.0, *, offset=0, flag=True, dims=[0, 1]):");
  const Signature required_keyword = parse_signature("f(Tensor x, *, int k) -> Tensor");
  const std::string text2 = fake_function(required_keyword, {parse_output_spec("like x", required_keyword, "out")}, "f");
  EXPECT_EQ(text2.substr(0, text2.find('\n')), "def f(x, *, k):");
}

TEST(OutputSpec, DefaultIsLikeTheFirstTensor) {
  const Signature sig = parse_signature("f(Tensor? b, Tensor x) -> Tensor");
  EXPECT_EQ(default_output_spec(sig).text, "like x");
}

}  // namespace
}  // namespace kreg
