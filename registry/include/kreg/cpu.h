// Helpers for CPU kernel libraries: float16 and bfloat16 storage types with
// exact conversions, so a CPU launcher handles every dtype torch hands it
// without including torch headers.
#pragma once

#include <cstdint>
#include <cstring>

#include "kreg/abi.h"

namespace kreg {

// IEEE binary16, converted by the compiler (GCC >= 12 and clang on x86-64 and
// aarch64 support _Float16 arithmetic conversions exactly).
using half = _Float16;

// bfloat16 is the top half of a float32.
struct bfloat16 {
  uint16_t bits;
};

inline float to_float(float v) { return v; }
inline float to_float(double v) { return static_cast<float>(v); }
inline float to_float(half v) { return static_cast<float>(v); }
inline float to_float(bfloat16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename T>
inline T from_float(float v);
template <>
inline float from_float<float>(float v) { return v; }
template <>
inline double from_float<double>(float v) { return v; }
template <>
inline half from_float<half>(float v) { return static_cast<half>(v); }
template <>
inline bfloat16 from_float<bfloat16>(float v) {
  // Round to nearest even, as torch does; NaN stays a quiet NaN.
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace kreg
