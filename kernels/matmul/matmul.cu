// c = a @ b on CUDA: the textbook shared-memory tiled matmul.
//
// Each 16 x 16 block computes a 16 x 16 tile of c: it walks k in steps of 16,
// staging a 16 x 16 tile of a and of b in shared memory (each element loaded
// once per block from global memory), accumulating in float. This is about
// correctness of shapes and dtypes, not speed: torch.matmul (cuBLAS, tensor
// cores) is 10-100x faster; closing that gap needs tensor-core MMA tiles.
#include "kreg/cuda.cuh"

namespace {

constexpr int kTile = 16;

template <typename T>
__global__ void matmul_tiled(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t m,
                             int64_t k, int64_t n) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
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
  if (row < m && col < n) c[row * n + col] = kreg::from_float<T>(acc);
}

template <typename T>
const char* launch(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* stream) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  if (a.sizes[1] != b.sizes[0]) return "a's columns must equal b's rows";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (m == 0 || n == 0) return nullptr;
  if ((m + kTile - 1) / kTile > 65535) return "more than 65535 * 16 rows";
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  matmul_tiled<T><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const T*>(a.data), static_cast<const T*>(b.data), static_cast<T*>(c.data), m, k, n);
  return kreg::last_launch_error();
}

}  // namespace

KREG_API const char* matmul_f32(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* s) { return launch<float>(c, a, b, s); }
KREG_API const char* matmul_f16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* s) { return launch<__half>(c, a, b, s); }
KREG_API const char* matmul_bf16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* s) { return launch<__nv_bfloat16>(c, a, b, s); }
