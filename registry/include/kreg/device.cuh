// Helpers for device code that NVRTC compiles (compiler = "nvrtc"): float
// bridging for __half and __nv_bfloat16, and storage <-> accumulator helpers
// (to_acc / from_acc) that cover double too, with nothing from the CUDA
// runtime (NVRTC takes no host code). kreg/cuda.cuh includes it for
// nvcc-built kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kreg/accumulate.h"

namespace kreg {

// For float, __half and __nv_bfloat16 storage: their accumulator is float.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// to_float(double) would narrow to float without a word: refused when it
// compiles (only a double argument picks this overload: for it, an exact
// match beats the conversion to to_float(float)).
template <typename T>
struct double_only {};
template <>
struct double_only<double> {
  using type = float;
};
template <typename T>
__device__ __forceinline__ typename double_only<T>::type to_float(T v) {
  static_assert(sizeof(T) == 0,
                "kreg::to_float(double) would narrow a double to float: for code templated on the storage type, "
                "use kreg::to_acc(v) and kreg::from_acc<T>(acc), whose accumulator is double for double "
                "(kreg::acc_t<T>)");
  return static_cast<float>(v);
}

// Defined for float, __half and __nv_bfloat16 below; any other T (double:
// there is no float to convert from without losing its precision) is
// refused when it compiles, instead of failing ptxas with "Unresolved extern
// function".
template <typename T>
__device__ __forceinline__ T from_float(float v) {
  static_assert(sizeof(T) == 0,
                "kreg::from_float<T> is defined for float, __half and __nv_bfloat16 only: for double (or code "
                "templated on the storage type), use kreg::from_acc<T>(acc) with acc from kreg::to_acc(v), whose "
                "accumulator is double for double (kreg::acc_t<T>)");
  return T(v);
}
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Storage <-> accumulator (acc_t, kreg/accumulate.h: float, or double for
// double storage). The helpers to write code once for every dtype, float64
// included; here (not in kreg/cuda.cuh) so NVRTC device code has them too.

__device__ __forceinline__ double to_acc(double v) { return v; }
template <typename T>
__device__ __forceinline__ float to_acc(T v) { return to_float(v); }

template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) { return from_float<T>(v); }
template <>
__device__ __forceinline__ double from_acc<double>(double v) { return v; }

}  // namespace kreg
