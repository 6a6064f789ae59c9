// Helpers for CPU kernel libraries: float16 and bfloat16 storage types with
// exact conversions, so a CPU launcher handles every dtype torch hands it
// without including torch headers.
#pragma once

#include <cstdint>
#include <cstring>

#include "kreg/abi.h"
#include "kreg/accumulate.h"

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

namespace kreg {

// to_acc / from_acc: to and from acc_t (kreg/accumulate.h).
template <typename T>
inline acc_t<T> to_acc(T v) { return to_float(v); }
inline double to_acc(double v) { return v; }

template <typename T>
inline T from_acc(acc_t<T> v) { return from_float<T>(v); }
template <>
inline double from_acc<double>(double v) { return v; }

// A kreg_tensor seen as rows of its last dimension (a 0-dim tensor is one row of one).
inline int64_t row_length(kreg_tensor t) { return t.ndim > 0 ? t.sizes[t.ndim - 1] : 1; }
inline int64_t row_count(kreg_tensor t) {
  const int64_t cols = row_length(t);
  return cols > 0 ? t.numel / cols : 0;
}

}  // namespace kreg
