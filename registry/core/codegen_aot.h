// The ahead-of-time registration units: what an exported package compiles so
// production code gets torch.ops.<kernel>.<op> without the JIT registry.
//
// One manifest becomes one installable package (registry/tools/aot.py writes it)
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

// Written into the first line of every generated unit, so an exported package
// says which generator wrote it. Bumped whenever the generated text changes.
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

}  // namespace kreg
