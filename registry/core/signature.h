// Op signatures as written in a manifest: the subset of torch's schema
// language that kernels use, e.g.
//   "axpy(Tensor x, Tensor y, float alpha) -> Tensor"
//   "layernorm(Tensor x, Tensor weight, Tensor? bias, float eps=1e-05) -> (Tensor y, Tensor mean, Tensor rstd)"
//   "scale_(Tensor(a!) x, float a) -> ()"
//
// Argument types, and what a launcher receives for each (kreg/abi.h):
//   Tensor        kreg_tensor
//   Tensor?       kreg_tensor; data == NULL and ndim == -1 when None is passed
//   Tensor(a!)    kreg_tensor, written in place (a fresh alias name per argument)
//   int           int64_t          float  float (narrowed once from Python's double);
//                                         double in a float64 launcher
//   bool          bool             int[]  kreg_int_list {data, size}
//   ScalarType?   int32_t: a KREG_DTYPE_* code, or -1 for None
// Defaults: `float eps=1e-06`, `int k=3`, `bool b=True`, `int[] dims=[0, 1]`,
// `Tensor? bias=None`, `ScalarType? dtype=None`. A bare `*` makes the arguments
// after it keyword-only. After an argument with a default, every positional
// one needs a default too (as in Python).
// Returns: `Tensor`, a tuple `(Tensor, Tensor)`, or `()`; each may be named
// (`(Tensor y, Tensor mean)`). Unnamed returns are called out (one) or
// out0, out1, ... (several) in the manifest and in launcher prototypes.
// At least one Tensor argument that is not optional is required: the op runs
// on its device. Anything else (Tensor[], Scalar, str, float?, ...) is an
// error that names what is supported.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace kreg {

enum class ArgType { kTensor, kFloat, kInt, kBool, kIntList, kScalarType };

struct Arg {
  ArgType type = ArgType::kTensor;
  std::string name;
  bool optional = false;      // Tensor? / ScalarType?
  bool mutated = false;       // Tensor(a!)
  std::string alias;          // the a in Tensor(a!)
  bool keyword_only = false;  // after a bare *
  bool has_default = false;
  std::string default_text;   // canonical: "1e-06" as written, "True", "[0, 1]", "None"

  bool is_tensor() const { return type == ArgType::kTensor; }
  // As written in a schema: "Tensor?", "Tensor(a!)", "int[]", "ScalarType?".
  std::string type_text() const;
};

struct Return {
  std::string name;    // as written, or out / out<i>
  bool named = false;  // written in the signature (kept in canonical())
};

struct Signature {
  std::string name;
  std::vector<Arg> args;
  std::vector<Return> returns;  // every return is a Tensor
  // Canonical text: single spaces, valid torch schema, as parse_signature
  // accepts. Two signatures with the same canonical text share a compiled
  // binding, and torch.library defines ops with exactly this text.
  std::string canonical() const;
  int tensor_count() const;
  // Index into args of the first Tensor that is not optional (the op's device).
  int first_tensor() const;
  // Index into args of the argument called `name`, or -1.
  int find_arg(const std::string& name) const;
  // Index into returns, or -1.
  int find_return(const std::string& name) const;
};

class SignatureError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws SignatureError with a message saying what was expected where.
Signature parse_signature(const std::string& text);

// "Tensor", "float", "int", "bool", "int[]", "ScalarType" (without ? or alias).
const char* arg_type_name(ArgType type);

// What the language accepts, for error messages.
inline constexpr const char* kSupportedArgTypes =
    "Tensor, Tensor?, Tensor(a!), int, float, bool, int[], ScalarType?";
inline constexpr const char* kSupportedReturns = "Tensor, a tuple (Tensor, Tensor, ...), or ()";

}  // namespace kreg
