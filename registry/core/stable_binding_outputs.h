// The stable binding's outputs (stable_binding_text.h), as pieces of its
// text that stable_prologue puts in place: the tensors the binding owns until
// torch takes them, and how each output is made (torch's allocator through
// the shims, raw CUDA caching-allocator memory for the fast entry, an
// isolated op's padding and its CPU outputs from the shared pool).
#pragma once

namespace kreg::stable_outputs {

// RawOutput, OwnedTensor and their ArgInfo (info_of).
extern const char* const kOwned;
// contiguous_strides, new_output, new_raw_output and allocate, with
// "@SHARED_OUTPUT@" where the CPU's takes kCpuShared (nothing on CUDA).
extern const char* const kNew;
// The CPU output of an isolated op's table from the shared output pool.
extern const char* const kCpuShared;

}  // namespace kreg::stable_outputs
