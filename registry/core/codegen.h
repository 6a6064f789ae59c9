// The generated binding: a small CPython extension per op signature.
//
// Why generated: the unit that includes torch headers is the slow one (the
// binding), so its text depends only on the op signature and backend, never
// on kernel code. It is compiled once per signature and reused by every
// kernel version with that signature; a kernel edit rebuilds only the kernel
// library, which includes no torch header at all.
//
// The module exposes make_op(name, launchers, same_shape_mask) -> callable.
// `launchers` maps dtype suffix -> launcher address (from dlsym on the kernel
// library). The callable checks its inputs (type, device, contiguity, dtype
// agreement, shapes, supported dtype; never an implicit copy), allocates the
// output through PyTorch, takes the current CUDA stream of the inputs'
// device, and calls the launcher:
//   const char* launcher(kreg_tensor out, kreg_tensor <each Tensor arg>...,
//                        <float|int64_t|bool scalars>..., void* stream)
// which returns nullptr or an error message (see registry/include/kreg/abi.h).
#pragma once

#include <string>

#include "signature.h"

namespace kreg {

// Bumped whenever the generated text changes in a way the signature does not
// capture; part of every binding key.
inline constexpr int kBindingTemplateVersion = 1;

// backend: "cpu" or "cuda". module_name must be a valid C identifier.
std::string generate_binding(const Signature& signature, const std::string& backend,
                             const std::string& module_name);

}  // namespace kreg
