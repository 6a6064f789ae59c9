// Helpers for CUDA kernel libraries: float bridging for __half and
// __nv_bfloat16 that compiles under the flags torch gives nvcc
// (-D__CUDA_NO_HALF_CONVERSIONS__ and friends forbid float(h) and h + h), and
// the launcher's error return.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kreg/abi.h"
#include "kreg/accumulate.h"
#include "kreg/device.cuh"  // to_float / from_float, to_acc / from_acc, shared with NVRTC device code

namespace kreg {

// to_acc / from_acc (to and from acc_t, kreg/accumulate.h; double included)
// come from kreg/device.cuh.

// N elements moved as one aligned load/store (N * sizeof(T) <= 16 bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
// Element l of a pack, widened to the accumulator type. A bfloat16 pair
// widens straight from its 32-bit word (a shift or a mask): splitting the
// word first put each half in a register of its own, so a bf16 row cached in
// registers took twice the registers of an f16 one (61 against 32 for
// softmax's 4-pack rows, halving the blocks an SM holds). l is a constant
// in the unrolled loops that call it.
template <typename T, int N>
__device__ __forceinline__ acc_t<T> acc_at(const Pack<T, N>& p, int l) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N % 2 == 0) {
    uint32_t word;
    memcpy(&word, &p.v[l & ~1], sizeof word);
    return __uint_as_float((l & 1) ? (word & 0xffff0000u) : (word << 16));
  } else {
    return to_acc(p.v[l]);
  }
}
// Elements per 16-byte pack.
template <typename T>
constexpr int pack_width() { return 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1; }

// A row can be read in packs when its start is 16-byte aligned and its length a multiple.
inline bool packs_fit(const void* p, int64_t cols, int width) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && cols % width == 0;
}

// Combinations for the reductions below.
struct SumOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
struct MaxOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return max(a, b); }
};

// Every lane of the warp gets op over the warp's values.
template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduction across a whole block of one row (blockDim.x a multiple of 32, at
// most 1024; blockDim.y 1), for the looping row kernels: every thread gets
// the result, warp 0 combining the warps' values as a warp (`identity` pads
// the lanes past the last warp); `scratch` holds 32 values. The cached
// kernels use row_reduce (below), which also takes several rows a block.
template <typename A, typename Op>
__device__ __forceinline__ A block_reduce(A v, A* scratch, Op op, A identity) {
  v = warp_reduce(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = threadIdx.x < warps ? scratch[threadIdx.x] : identity;
  if (warp == 0) v = warp_reduce(v, op);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  const A result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* scratch) { return block_reduce(v, scratch, SumOp{}, A(0)); }
template <typename A>
__device__ __forceinline__ A block_max(A v, A* scratch) { return block_reduce(v, scratch, MaxOp{}, A(-INFINITY)); }

// Threads per row-block: enough to keep a row's loads in flight, a multiple of 32.
inline int row_threads(int64_t packs) {
  int threads = 32;
  while (threads < 1024 && threads < packs) threads <<= 1;
  return threads;
}

// How a row kernel lays rows onto threads when a whole row fits in
// registers (each row read from DRAM once, however many passes the math
// makes): `threads` threads hold a row, `packs_per_thread` 16-byte packs each
// (thread t owns packs t, t + threads, ...; the same columns on every row);
// short rows (one warp) share a block, `rows_per_block` of them, so a block
// has at least 128 threads. packs_per_thread == 0: the row is too long for
// registers (over 8192 packs, 128 KiB) and the kernel's looping path runs.
// Four packs a thread keeps 64 bytes of loads in flight per thread and, at
// <= 256 threads a row, several blocks per SM to hide each other's reductions.
//
// The hand-set constants are defines a kernel's [tune] table may set
// (kernel.toml; registry.tune searches them), defaulting to the values above:
//   KREG_ROW_PACKS         the fewest packs a thread holds on rows over one
//                          warp's 128 packs (1, 2, 4 or 8; doubled up to 8
//                          until the row fits 32 warps)
//   KREG_ROW_BLOCK_THREADS the threads a block has at least (32..1024, a
//                          power of two): short rows share a block up to it
#ifndef KREG_ROW_PACKS
#define KREG_ROW_PACKS 4
#endif
#ifndef KREG_ROW_BLOCK_THREADS
#define KREG_ROW_BLOCK_THREADS 128
#endif
static_assert(KREG_ROW_PACKS == 1 || KREG_ROW_PACKS == 2 || KREG_ROW_PACKS == 4 || KREG_ROW_PACKS == 8,
              "KREG_ROW_PACKS must be 1, 2, 4 or 8 (the packs per thread the row kernels instantiate)");
static_assert(KREG_ROW_BLOCK_THREADS >= 32 && KREG_ROW_BLOCK_THREADS <= 1024 &&
                  (KREG_ROW_BLOCK_THREADS & (KREG_ROW_BLOCK_THREADS - 1)) == 0,
              "KREG_ROW_BLOCK_THREADS must be a power of two from 32 to 1024");
struct RowPlan {
  int packs_per_thread;
  int threads;
  int rows_per_block;
};
inline RowPlan plan_rows(int64_t packs) {
  const auto warps_for = [](int64_t n) { return static_cast<int>((n + 31) / 32); };
  constexpr int kBlock = KREG_ROW_BLOCK_THREADS;
  if (packs <= 32 * 4) {
    const int per = packs <= 32 ? 1 : packs <= 64 ? 2 : 4;
    return {per, 32, kBlock / 32};
  }
  for (int per = KREG_ROW_PACKS; per <= 8; per *= 2) {
    const int64_t warps = warps_for((packs + per - 1) / per);
    if (warps <= 32) {
      const int threads = static_cast<int>(warps) * 32;
      return {per, threads, threads < kBlock ? kBlock / threads : 1};
    }
  }
  return {0, 0, 0};
}

// Reduction of one value per thread across a row's threads (blockDim.x of
// them, a multiple of 32; blockDim.y rows per block, at most 32 warps in
// all); every thread of the row gets the result, combined in one fixed order.
// A one-warp row needs no shared memory and no barrier; otherwise every
// thread of the block must call it (rows past the end too).
template <typename A, typename Op>
__device__ __forceinline__ A row_reduce(A v, A* scratch, Op op) {
  v = warp_reduce(v, op);
  const int warps = blockDim.x >> 5;
  if (warps == 1) return v;
  A* row = scratch + threadIdx.y * warps;
  if ((threadIdx.x & 31) == 0) row[threadIdx.x >> 5] = v;
  __syncthreads();
  v = row[0];
  for (int w = 1; w < warps; ++w) v = op(v, row[w]);
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}
template <typename A>
__device__ __forceinline__ A row_sum(A v, A* scratch) { return row_reduce(v, scratch, SumOp{}); }
template <typename A>
__device__ __forceinline__ A row_max(A v, A* scratch) { return row_reduce(v, scratch, MaxOp{}); }

// Loads and stores of data touched once: evict-first in L2, so a row kernel's
// stream does not push out what is reused (weights, the next rows).
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_once(const Pack<T, N>* p) {
  static_assert(sizeof(Pack<T, N>) == 16 || sizeof(Pack<T, N>) <= 8, "packs are 16 bytes or a scalar");
  Pack<T, N> out;
  if constexpr (sizeof(Pack<T, N>) == 16) {
    const int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
    memcpy(&out, &raw, 16);
  } else {
    out = *p;
  }
  return out;
}
template <typename T, int N>
__device__ __forceinline__ void store_once(Pack<T, N>* p, const Pack<T, N>& v) {
  if constexpr (sizeof(Pack<T, N>) == 16) {
    int4 raw;
    memcpy(&raw, &v, 16);
    __stcs(reinterpret_cast<int4*>(p), raw);
  } else {
    *p = v;
  }
}

// Blocks that fit on the current device at once for `threads`-thread blocks
// (2048 threads an SM on sm_80+): enough to fill it, used by grid-stride kernels.
inline int resident_blocks(int threads) {
  static int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 1;
  }();
  return sms * (2048 / threads);
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

// The launch side of row kernels: planned grids, pack-count dispatch, the
// row-count refusal (after everything above, which it uses).
#include "kreg/row_launch.cuh"
