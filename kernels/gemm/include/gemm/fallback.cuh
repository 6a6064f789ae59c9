// The portable path: kreg/tiled_matmul.cuh's shared-memory tiled product with
// the same epilogue, for GPUs without wgmma and operands TMA cannot take
// (misaligned bases, rows not a multiple of 16 bytes). Correct, not fast: f32
// accumulation, 16 x 16 tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kreg/cuda.cuh"
#include "kreg/tiled_matmul.cuh"

namespace gemm {

template <typename T>
__global__ void tiled(T* __restrict__ d, const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c,
                      const T* __restrict__ bias, float alpha, float beta, int64_t m, int64_t n, int64_t k) {
  int64_t row, col;
  const float sum = kreg::tiled_matmul_sum(a, b, m, k, n, row, col);
  if (row >= m || col >= n) return;
  float out = alpha * sum;
  if (c != nullptr) out += beta * kreg::to_float(c[row * n + col]);
  if (bias != nullptr) out += kreg::to_float(bias[col]);
  d[row * n + col] = kreg::from_float<T>(out);
}

template <typename T>
const char* run_tiled(T* d, const T* a, const T* b, const T* c, const T* bias, float alpha, float beta, int64_t m,
                      int64_t n, int64_t k, cudaStream_t stream) {
  if (m > kreg::kTiledMatmulMaxRows) return "the portable path takes at most 65535 * 16 rows";
  tiled<T><<<kreg::tiled_matmul_grid(m, n), kreg::tiled_matmul_block(), 0, stream>>>(d, a, b, c, bias, alpha, beta,
                                                                                      m, n, k);
  return kreg::last_launch_error();
}

}  // namespace gemm
