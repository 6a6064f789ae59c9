// The portable path: a shared-memory tiled GEMM with the same epilogue, for
// GPUs without wgmma and operands TMA cannot take (misaligned bases, rows not
// a multiple of 16 bytes). Correct, not fast: f32 accumulation, 16 x 16 tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kreg/cuda.cuh"

namespace gemm {

constexpr int kTile = 16;

template <typename T>
__global__ void tiled(T* __restrict__ d, const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c,
                      const T* __restrict__ bias, float alpha, float beta, int64_t m, int64_t n, int64_t k) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile + 1];
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int64_t p0 = 0; p0 < k; p0 += kTile) {
    const int64_t pa = p0 + threadIdx.x, pb = p0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = row < m && pa < k ? kreg::to_float(a[row * k + pa]) : 0.0f;
    bs[threadIdx.y][threadIdx.x] = pb < k && col < n ? kreg::to_float(b[pb * n + col]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kTile; ++q) acc += as[threadIdx.y][q] * bs[q][threadIdx.x];
    __syncthreads();
  }
  if (row >= m || col >= n) return;
  float out = alpha * acc;
  if (c != nullptr) out += beta * kreg::to_float(c[row * n + col]);
  if (bias != nullptr) out += kreg::to_float(bias[col]);
  d[row * n + col] = kreg::from_float<T>(out);
}

template <typename T>
const char* run_tiled(T* d, const T* a, const T* b, const T* c, const T* bias, float alpha, float beta, int64_t m,
                      int64_t n, int64_t k, cudaStream_t stream) {
  if ((m + kTile - 1) / kTile > 65535) return "the portable path takes at most 65535 * 16 rows";
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  tiled<T><<<grid, block, 0, stream>>>(d, a, b, c, bias, alpha, beta, m, n, k);
  return kreg::last_launch_error();
}

}  // namespace gemm
