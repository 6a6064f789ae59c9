// axpy's launchers (one per dtype, see registry/include/kreg/abi.h) and the
// arithmetic both backends share.
#pragma once

#include "axpy_math.h"
#include "kreg/abi.h"

#define AXPY_LAUNCHER(suffix)                                                         \
  KREG_API const char* axpy_##suffix(kreg_tensor out, kreg_tensor x, kreg_tensor y, \
                                     float alpha, [[maybe_unused]] void* stream)

AXPY_LAUNCHER(f32);
AXPY_LAUNCHER(f16);
AXPY_LAUNCHER(bf16);
