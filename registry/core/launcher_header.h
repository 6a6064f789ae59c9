// Launcher prototypes, generated from the op signatures and force-included
// (-include) into every source of a kernel library, so the compiler checks
// each launcher against its signature; and each op's entry (below).
//
// Launchers are extern "C": without a prototype in scope, a launcher taking
// `double a` where the signature says `float a`, or written pybind-style
// `(float* out, const float* x, ...)`, links fine and misbehaves at run time.
// With the prototype in scope, a definition that disagrees is a "conflicting
// declaration" compile error; explain_launcher_mismatch turns that error into
// one that names the op, the argument and both types.
//
// A launcher's parameters (registry/include/kreg/abi.h): each return
// (kreg_tensor, named like the return), each argument in signature order
// (kreg_tensor, float, int64_t, bool, kreg_int_list, int32_t for ScalarType?),
// then void* stream. A `float` argument is `double` in a float64 launcher
// (scalar_c_type), so a float64 op computes with the scalar the caller gave.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "manifest.h"

namespace kreg {

// The launcher ABI's generation, named in the generated header and in the
// messages of a launcher that disagrees with it: bumped when what a launcher
// must accept changes, so a user reads why an older kernel stopped compiling.
// Keys do not use it: they hash the generated text (build_keys.cc).
inline constexpr int kLauncherHeaderVersion = 3;  // 2: float64 launchers take double scalars; 3: op entries

struct LauncherParam {
  std::string type;  // "kreg_tensor", "float", "void*", ...
  std::string name;  // "out", "x", "stream"
  std::string what;  // what the signature says: "Tensor x", "float alpha", "return y", "the stream"
};

// The C type a `float` argument has in the launcher of `dtype`: "double" for
// float64 (narrowing 0.1 to float is off by 1.5e-9, far outside what float64
// results are checked to), "float" for every other dtype (kreg/abi.h).
std::string scalar_c_type(const std::string& dtype);

// The launcher's parameters for one op and dtype.
std::vector<LauncherParam> launcher_params(const Signature& signature, const std::string& dtype);

// "axpy_f32"
std::string launcher_symbol(const OpSpec& op, const std::string& dtype);

// The header text for every op and listed dtype of a kernel.
std::string generate_launcher_header(const std::string& kernel, const std::vector<OpSpec>& ops);

// "kreg_entry__axpy": the op's entry (kreg_entry_fn, kreg/abi.h).
std::string entry_symbol(const OpSpec& op);

// Per op, its entry, which calls one of the op's launchers with the values
// the shared binding passes (core/codegen.h): weak definitions, part of the
// launcher header (so of every source, and no extra compile). Launchers keep
// their typed prototypes; the one compiled binding needs no code per signature.
std::string generate_launcher_entries(const std::vector<OpSpec>& ops);

// Every launcher symbol the kernel library must export: one per op and dtype.
std::vector<std::string> required_launchers(const std::vector<OpSpec>& ops);

// Given compiler output (and source excerpts at its error lines), a message per
// launcher whose definition conflicts with its prototype, naming the op, the
// argument and both types; empty when the output shows no such conflict.
std::vector<std::string> explain_launcher_mismatch(const std::vector<OpSpec>& ops,
                                                   const std::string& compiler_output,
                                                   const std::vector<std::string>& excerpts);

// Launchers of `exported` missing for a listed dtype: one message each, saying
// what to define or what to remove from the manifest.
std::vector<std::string> missing_launchers(const std::string& kernel, const std::vector<OpSpec>& ops,
                                           const std::vector<std::string>& exported);

}  // namespace kreg
