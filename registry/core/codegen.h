// The shared binding: one CPython extension that serves every op signature.
//
// Why one: the unit that includes torch headers is the slow one to compile
// (15-50 s), so its text depends on no signature, no kernel and no kernel
// code. Built on torch's stable ABI and Python's limited API
// (stable_binding_text.h), it is compiled once per (stable target, CUDA
// major, compiler, backend) and reused by every op, every torch from the
// target on and every Python from 3.10 on; a new signature or a kernel edit
// rebuilds only the kernel library, which includes no torch header at all.
//
// What is per signature travels at run time:
//   * the schema: kreg_define(namespace, schema) registers
//     <namespace>::call(<signature args>, int kreg_table) with one boxed
//     kernel for CPU and CUDA (torch.ops, torch.compile's fakes, opcheck);
//   * the arguments: the launcher table (core/launcher_table.h) carries each
//     argument's kind, name and fixed dtype, the outputs' declarations
//     (core/output_spec.h), the same-shape and Tensor(a!) masks, and the
//     launcher per dtype;
//   * the typed call: the kernel library's generated entry (kreg_entry_fn,
//     kreg/abi.h; core/launcher_header.h) spreads the values into the
//     launcher's typed parameters, so launcher prototypes stay checked by the
//     compiler as before.
// The op checks its inputs (device, contiguity, dtypes, shapes; never an
// implicit copy), allocates the outputs through PyTorch from their
// declarations, takes the current CUDA stream of the inputs' device, and
// calls the entry. The handle's fast entry (core/fast_entry.h) is part of it.
#pragma once

#include <string>

#include "signature.h"

namespace kreg {

// backend: "cpu" or "cuda".
std::string generate_shared_binding(const std::string& backend);

// The schema kreg_define registers for an op: "call(Tensor x, float alpha, int kreg_table) -> Tensor"
// (positional, no defaults: the handle passes every argument).
std::string binding_schema(const Signature& signature);

}  // namespace kreg
