// The textbook shared-memory tiled product a @ b for CUDA kernels that want a
// portable one (kernels/matmul, kernels/gemm's fallback): each 16 x 16 block
// computes a 16 x 16 tile of the output, walking k in steps of 16 and staging
// a tile of a and of b in shared memory (each element loaded once per block),
// accumulating in float. Correct, not fast: tensor-core MMA tiles are 10-100x
// faster. The kernel writes each sum through its own epilogue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kreg/cuda.cuh"

namespace kreg {

constexpr int kMatmulTile = 16;
// Tile rows are blockIdx.y, at most 65535 of them.
constexpr int64_t kTiledMatmulMaxRows = 65535LL * kMatmulTile;

// This thread's (row, col) of the m x n product of row-major a [m, k] and
// b [k, n], and its sum a[row, :] . b[:, col] in float (0 outside the
// product). Every thread of the block calls it: it synchronizes the block.
template <typename T>
__device__ float tiled_matmul_sum(const T* __restrict__ a, const T* __restrict__ b, int64_t m, int64_t k, int64_t n,
                                  int64_t& row, int64_t& col) {
  __shared__ float as[kMatmulTile][kMatmulTile];
  __shared__ float bs[kMatmulTile][kMatmulTile + 1];  // +1: no bank conflicts on the column reads
  row = static_cast<int64_t>(blockIdx.y) * kMatmulTile + threadIdx.y;
  col = static_cast<int64_t>(blockIdx.x) * kMatmulTile + threadIdx.x;
  float acc = 0.0f;
  for (int64_t p0 = 0; p0 < k; p0 += kMatmulTile) {
    const int64_t pa = p0 + threadIdx.x, pb = p0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = row < m && pa < k ? to_float(a[row * k + pa]) : 0.0f;
    bs[threadIdx.y][threadIdx.x] = pb < k && col < n ? to_float(b[pb * n + col]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMatmulTile; ++q) acc += as[threadIdx.y][q] * bs[q][threadIdx.x];
    __syncthreads();
  }
  return acc;
}

// The blocks and the grid of tiles over an m x n product (m <= kTiledMatmulMaxRows).
inline dim3 tiled_matmul_block() { return dim3(kMatmulTile, kMatmulTile); }
inline dim3 tiled_matmul_grid(int64_t m, int64_t n) {
  return dim3(static_cast<unsigned>((n + kMatmulTile - 1) / kMatmulTile),
              static_cast<unsigned>((m + kMatmulTile - 1) / kMatmulTile));
}

}  // namespace kreg
