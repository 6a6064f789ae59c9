// The ahead-of-time registration units: what an exported package compiles so
// production code gets torch.ops.<kernel>.<op> without the JIT registry.
//
// One manifest becomes one installable package (registry/aot.py writes it)
// with one extension module per unit:
//
//   <pkg>._C       the def unit: TORCH_LIBRARY(<ns>, m) { m.def("<canonical signature>"); }
//                  for every op. No kernel code, so it loads on any machine.
//   <pkg>._C_cpu   the CPU impl unit + the manifest's [cpu] sources
//   <pkg>._C_cuda  the CUDA impl unit + the manifest's [cuda] sources
//
// An impl unit registers TORCH_LIBRARY_IMPL(<ns>, CPU|CUDA, m) with one
// function per op, <op>_<backend>, which checks, allocates, takes the stream
// and dispatches on dtype exactly like the JIT binding (the same generated
// text, see binding_text below), but calls launchers linked into the same
// module instead of addresses from a table filled at run time.
//
// CPU and CUDA launchers share symbol names (in the JIT path they live in
// separate libraries), hence one module per backend. The impl unit declares
// them with hidden visibility: the linker gives a symbol the most restrictive
// visibility any object asks for, so the launchers, which the kernel exports
// with KREG_API (default visibility), stay private to their module, and a
// launcher the kernel does not define fails the package build (a hidden
// symbol must be defined in the module) instead of the import.
//
// Each unit also defines its module's PyInit_<module_name>, so `import
// <pkg>._C_cpu` works; the module is empty and importing it runs the static
// registrations. Outputs are allocated from their declarations in the
// manifest (core/output_spec.h); a Tensor(a!) argument is written in place.
#pragma once

#include <string>
#include <vector>

#include "manifest.h"
#include "signature.h"

namespace kreg {

// Bumped whenever the generated text changes in a way the inputs do not capture.
inline constexpr int kAotTemplateVersion = 2;

// The def unit. ns: the library namespace (the kernel name); module_name: the
// extension module's last dotted component (a C identifier, e.g. "_C").
// Uses each op's signature only. Throws std::invalid_argument.
std::string generate_aot_def(const std::string& ns, const std::vector<OpSpec>& ops,
                             const std::string& module_name);

// The impl unit for backend "cpu" or "cuda". Uses each op's signature,
// launcher prefix, dtypes and same_shape. Throws std::invalid_argument.
std::string generate_aot_impl(const std::string& ns, const std::vector<OpSpec>& ops,
                              const std::string& backend, const std::string& module_name);

// The text pieces generate_binding (codegen.cc, where they are defined) and
// the AOT generator share. Declared here rather than in codegen.h to keep the
// JIT header's interface unchanged.
namespace binding_text {

// Includes and helpers every unit starts with: LauncherTable, dtype_slot,
// view_of, check_tensor. with_table_lookup adds table_at, for the JIT binding
// whose table arrives as an op argument.
std::string prologue(const std::string& backend, bool with_table_lookup);

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
// (each return, each argument, the stream)
std::string launcher_params(const Signature& signature);

// An op function's body after `const LauncherTable& table = ...;`: the input
// checks, dtype dispatch, allocation of each output from its declaration,
// stream, the launcher call through `launcher_type` (a function pointer type)
// and the closing brace.
std::string checks_and_call(const Signature& signature, const std::string& backend,
                            const std::string& launcher_type);

}  // namespace binding_text
}  // namespace kreg
