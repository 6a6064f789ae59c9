// Manifests derived in memory from a kernel's own, built and cached as any
// kernel (core/plan.h) with no folder of their own: the sources stay where the
// user edits them, so a diagnostic names the user's file as it is.
//
//   with_config (manifest.h)  another config of the kernel's [tune] space (registry.tune)
//   with_dtypes (dtype_units.h)  only some dtypes' own units (registry.tune of one dtype)
//   with_extra_flags          the same kernel with compile and link flags added (checked
//                             builds: sanitizers, -lineinfo), as a named variant
//
// A derived manifest differs from the kernel's in the fields its key covers
// (flags, defines), so it is cached apart; it keeps a memo of its own (plan.cc)
// so that the kernel's plain get still finds its memo vouching for its key.
#pragma once

#include <string>
#include <vector>

#include "manifest.h"

namespace kreg {

// `cflags` join `backend`'s section flags ("cpu" or "cuda": the host
// compiler's, or nvcc's), `ldflags` the link's. `variant` names the derived build ("checked"):
// non-empty, a lower-case identifier. Throws ManifestError when the manifest
// has no such backend.
Manifest with_extra_flags(const Manifest& manifest, const std::string& backend,
                          const std::vector<std::string>& cflags, const std::vector<std::string>& ldflags,
                          const std::string& variant);

}  // namespace kreg
