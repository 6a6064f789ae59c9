// Op signatures as written in a manifest, e.g.
//   "axpy(Tensor x, Tensor y, float alpha) -> Tensor"
// Argument types: Tensor, float (a Python float, narrowed to C float), int
// (int64_t), bool. The result is one Tensor, allocated by PyTorch with the
// shape, dtype and device of the first Tensor argument.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace kreg {

enum class ArgType { kTensor, kFloat, kInt, kBool };

struct Arg {
  ArgType type;
  std::string name;
};

struct Signature {
  std::string name;
  std::vector<Arg> args;
  // Canonical text: single spaces, as parse_signature would accept. Two
  // signatures with the same canonical text share a compiled binding.
  std::string canonical() const;
  int tensor_count() const;
};

class SignatureError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws SignatureError with a message saying what was expected where.
Signature parse_signature(const std::string& text);

const char* arg_type_name(ArgType type);

}  // namespace kreg
