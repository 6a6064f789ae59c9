// Helpers for CUDA kernel libraries: float bridging for __half and
// __nv_bfloat16 that compiles under the flags torch gives nvcc
// (-D__CUDA_NO_HALF_CONVERSIONS__ and friends forbid float(h) and h + h), and
// the launcher's error return.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kreg/abi.h"
#include "kreg/device.cuh"  // to_float / from_float, shared with NVRTC device code

namespace kreg {

// Reductions accumulate in float, or double for double storage.
template <typename T>
struct Accumulator {
  using type = float;
};
template <>
struct Accumulator<double> {
  using type = double;
};
template <typename T>
using acc_t = typename Accumulator<T>::type;

__device__ __forceinline__ double to_acc(double v) { return v; }
template <typename T>
__device__ __forceinline__ float to_acc(T v) { return to_float(v); }

template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) { return from_float<T>(v); }
template <>
__device__ __forceinline__ double from_acc<double>(double v) { return v; }

// N elements moved as one aligned load/store (N * sizeof(T) <= 16 bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
// Elements per 16-byte pack.
template <typename T>
constexpr int pack_width() { return 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1; }

// A row can be read in packs when its start is 16-byte aligned and its length a multiple.
inline bool packs_fit(const void* p, int64_t cols, int width) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && cols % width == 0;
}

// Warp and block reductions (blockDim.x a multiple of 32, at most 1024).
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <typename A>
__device__ __forceinline__ A warp_max(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets the sum; `scratch` holds 32 values.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = threadIdx.x < warps ? scratch[threadIdx.x] : A(0);
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  const A result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}
template <typename A>
__device__ __forceinline__ A block_max(A v, A* scratch) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = threadIdx.x < warps ? scratch[threadIdx.x] : -INFINITY;
  if (warp == 0) v = warp_max(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  const A result = scratch[0];
  __syncthreads();
  return result;
}

// Threads per row-block: enough to keep a row's loads in flight, a multiple of 32.
inline int row_threads(int64_t packs) {
  int threads = 32;
  while (threads < 1024 && threads < packs) threads <<= 1;
  return threads;
}

// A kreg_tensor seen as rows of its last dimension.
inline int64_t row_length(kreg_tensor t) { return t.ndim > 0 ? t.sizes[t.ndim - 1] : 1; }
inline int64_t row_count(kreg_tensor t) {
  const int64_t cols = row_length(t);
  return cols > 0 ? t.numel / cols : 0;
}

// What a launcher returns after its launches: NULL, or the launch error.
inline const char* last_launch_error() {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace kreg
