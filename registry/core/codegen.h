// The generated binding: a small CPython extension per op signature.
//
// Why generated: the unit that includes torch headers is the slow one (the
// binding), so its text depends only on the op signature and backend, never
// on kernel code. It is compiled once per signature and reused by every
// kernel version with that signature; a kernel edit rebuilds only the kernel
// library, which includes no torch header at all.
//
// The module registers kreg_<hash>::call(<signature args>, int kreg_table).
// The table (core/launcher_table.h defines and fills it) carries
// everything that is not the signature: the launcher address per dtype (from
// dlsym on the kernel library), each argument's fixed dtype, each output's
// declared dtype and shape (core/output_spec.h) and the same-shape mask. The
// op checks its inputs (device, contiguity, dtypes, shapes; never an implicit
// copy), allocates the outputs through PyTorch from their declarations, takes
// the current CUDA stream of the inputs' device, and calls the launcher:
//   const char* launcher(kreg_tensor <each return>..., <each argument>..., void* stream)
// which returns nullptr or an error message (see registry/include/kreg/abi.h
// and core/launcher_header.h).
#pragma once

#include <string>

#include "signature.h"

namespace kreg {

// Bumped whenever the generated text changes in a way the signature does not
// capture; part of every binding key.
inline constexpr int kBindingTemplateVersion = 9;  // 7: tuned routes; 8: float64 launchers get float arguments as double; 9: shared outputs of isolated CPU ops

// backend: "cpu" or "cuda". module_name must be a valid C identifier.
std::string generate_binding(const Signature& signature, const std::string& backend,
                             const std::string& module_name);

}  // namespace kreg
