// The JIT shared binding's fixed part, on torch's stable ABI (codegen.h).
//
// Why stable: a binding that includes ATen or c10 headers is tied to the
// torch (and Python) it was compiled against, so every torch upgrade and
// every teammate on another torch recompiled it (15-50 s). This text includes
// only torch/csrc/stable (the C shims of aoti_torch/c/shim.h underneath),
// pinned with TORCH_TARGET_VERSION to the oldest torch the registry supports,
// and Python's limited API: one compiled file serves every torch from that
// version on and every Python from 3.10 on, for one CUDA major.
//
// What a call needs from torch goes through the shims: each tensor's data,
// sizes, strides, dtype and device (aoti_torch_get_*), new outputs
// (aoti_torch_empty_strided; the dispatcher's aten::empty where torch fills
// new memory), an isolated op's pooled output (torch_from_blob), the device
// guard and the current CUDA stream. The checks speak of tensors as
// `ArgInfo`s, so the dispatcher's boxed kernel (codegen.cc) and the handle's
// fast entry (fast_entry.cc, which reads tensors through DLPack) share them
// and their messages, word for word those of the ATen binding
// (binding_text.cc, which the AOT units still use). How outputs are owned and
// made is its own file (stable_binding_outputs.h), put in place here.
#pragma once

#include <string>

namespace kreg {

// The oldest torch whose stable ABI the binding targets: TORCH_TARGET_VERSION
// in the text, and an input of the binding's key (core/build_keys.cc).
inline constexpr const char* kStableTargetTorch = "2.11";

// Includes, the table's types, the dtype tables, ArgInfo, the checks, output
// allocation and the stream, for `backend` ("cpu" or "cuda").
std::string stable_prologue(const std::string& backend);

}  // namespace kreg
