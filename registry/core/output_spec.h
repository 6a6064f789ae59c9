// Outputs declared once, in terms of the inputs. A manifest's
//
//   [[op]]
//   signature = "layernorm(Tensor x, Tensor weight, Tensor? bias, float eps=1e-05) -> (Tensor y, Tensor mean, Tensor rstd)"
//   outputs   = { y = "like x", mean = "float32[x.shape[:-1]]", rstd = "float32[x.shape[:-1]]" }
//
// gives each return's dtype and shape; the device is always the op's (that of
// its first Tensor argument). The generated binding allocates from it, the
// fake (meta) kernel torch.compile traces with is generated from it
// (fake_function below), and the AOT package uses both.
//
// Notation (reads like the Python it stands for):
//   spec  := "like" NAME                 shape and dtype of Tensor argument NAME
//          | dtype "[" [dim {"," dim}] "]"
//   dtype := a dtype name (float32, int64, ...) | NAME ".dtype"
//   dim   := NAME ".shape"                every dim of NAME
//          | NAME ".shape[" [start] ":" [stop] "]"   a Python slice of them
//          | NAME ".size(" int ")"       one dim; negative counts from the end
//          | int                          a constant
// Examples: "x.dtype[x.size(0), w.size(0)]" (a matmul), "int64[x.shape[:-1]]"
// (an argmax over the last dim), "float32[]" (a 0-dim tensor).
// NAME must be a Tensor argument that is not optional (it may be None).
// A single return with no declaration is "like" the first Tensor argument.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "signature.h"

namespace kreg {

struct DimTerm {
  enum Kind : int32_t { kConst = 0, kSize = 1, kSlice = 2 };
  Kind kind = kConst;
  int32_t arg = -1;   // index into Signature::args (kSize, kSlice)
  int64_t a = 0;      // kConst: the value; kSize: the dim; kSlice: start
  int64_t b = 0;      // kSlice: stop (kSliceEnd: to the end)
};
inline constexpr int64_t kSliceEnd = std::numeric_limits<int64_t>::max();

struct OutputSpec {
  std::string text;        // as written (canonical spacing)
  int32_t dtype_code = -1; // a fixed dtype (dtype table code), or -1
  int32_t dtype_arg = -1;  // or the dtype of this argument
  std::vector<DimTerm> dims;
};

// Throws SignatureError naming the output, the text and what is expected.
OutputSpec parse_output_spec(const std::string& text, const Signature& signature,
                             const std::string& output_name);

// The default for a single undeclared return: like the first Tensor argument.
OutputSpec default_output_spec(const Signature& signature);

// Python source of the fake (meta) function for an op whose outputs are
// `outputs` (one per return): "def <fn_name>(x, w, eps=1e-05, *, k=0):\n    return ...".
// Parameters as the schema has them: defaults, and a bare * before the
// keyword-only ones (torch calls a fake with the arguments its caller wrote).
// label: how its errors name the op, "<kernel>.<op>" as the binding's do
// (the signature's name when empty).
std::string fake_function(const Signature& signature, const std::vector<OutputSpec>& outputs,
                          const std::string& fn_name, const std::string& label = "");

}  // namespace kreg
