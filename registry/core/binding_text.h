// The text pieces of a generated AOT registration unit (codegen_aot.h): ATen
// and torch/library.h, launchers linked in, tables constant. The JIT shared
// binding is on torch's stable ABI instead (stable_binding_text.h); its
// checks say word for word what these say (codegen_aot_test.cc compares
// them). Each function returns C++ (or schema) text.
#pragma once

#include <string>

#include "signature.h"

namespace kreg {
namespace binding_text {

// Includes and helpers every unit starts with: LauncherTable, dtype_slot,
// view_of, check_tensor.
std::string prologue(const std::string& backend);

// The first Tensor argument (the output is allocated like it); throws
// std::invalid_argument naming `caller` when there is none.
const Arg& first_tensor(const Signature& signature, const std::string& caller);

// "const at::Tensor& x, const at::Tensor& y, double alpha"
std::string cpp_params(const Signature& signature);

// "Tensor x, Tensor y, float alpha": positional, no defaults (the JIT op's schema)
std::string schema_params(const Signature& signature);

// "Tensor", "(Tensor, Tensor)" or "()"
std::string schema_returns(const Signature& signature);

// "at::Tensor", "std::tuple<at::Tensor, at::Tensor>" or "void"
std::string cpp_return_type(const Signature& signature);

// A launcher's parameter types: "kreg_tensor, kreg_tensor, kreg_tensor, float, void*"
// (each return, each argument, the stream) for the launcher of `dtype`: a
// float argument is double in a float64 one (scalar_c_type, launcher_header.h).
std::string launcher_params(const Signature& signature, const std::string& dtype = "float32");

// An op function's body after `const LauncherTable& table = ...;`: the input
// checks, dtype dispatch, allocation of each output from its declaration,
// stream, the launcher call through `launcher_type` (a function pointer type,
// launcher_params of any dtype but float64) and the closing brace. When the
// signature has a float argument, a float64 dispatch calls through the float64
// launcher's type instead, passing the double unnarrowed.
std::string checks_and_call(const Signature& signature, const std::string& backend,
                            const std::string& launcher_type);

}  // namespace binding_text
}  // namespace kreg
