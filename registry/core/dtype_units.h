// A build of only some of a kernel's dtypes, for registry.tune: a source named
// exactly like one of its launchers (gemm_bf16.cu beside the launcher
// gemm_bf16) is that launcher's own unit. A tune of bfloat16 needs no other
// dtype's code, and a CUTLASS unit costs ~40 s of nvcc: each config it builds
// leaves the other dtypes' units out, with them the launchers they define.
//
// A source not named like a launcher is shared by every dtype and always
// kept; so is an op's last dtype (the op stays callable). Only the backend
// being built is looked at ([cpu] and [cuda] may split their units
// differently). A plain get never restricts: every listed dtype is built.
#pragma once

#include <string>
#include <vector>

#include "manifest.h"

namespace kreg {

// `manifest` building, for `backend`, only the per-dtype units of `dtypes`:
// each other dtype whose launcher has its own unit among the backend's
// `sources` loses that unit and its place in the op's dtypes. When nothing is
// left out, the manifest unchanged (the same build and key as a plain get's);
// else its dtype_subset names what the build keeps, "<op>:<dtype>" for each
// op's dtypes (the key and the memo cover it). Unknown dtypes are ignored: a subset, never an error.
Manifest with_dtypes(const Manifest& manifest, const std::string& backend, const std::vector<std::string>& dtypes);

}  // namespace kreg
