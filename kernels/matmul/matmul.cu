// c = a @ b on CUDA: kreg/tiled_matmul.cuh's textbook shared-memory tiled
// product, stored as it is. This is about correctness of shapes and dtypes,
// not speed: torch.matmul (cuBLAS, tensor cores) is 10-100x faster; closing
// that gap needs tensor-core MMA tiles.
#include "kreg/cuda.cuh"
#include "kreg/tiled_matmul.cuh"

namespace {

template <typename T>
__global__ void matmul_tiled(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t m,
                             int64_t k, int64_t n) {
  int64_t row, col;
  const float sum = kreg::tiled_matmul_sum(a, b, m, k, n, row, col);
  if (row < m && col < n) c[row * n + col] = kreg::from_float<T>(sum);
}

template <typename T>
const char* launch(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* stream) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  if (a.sizes[1] != b.sizes[0]) return "a's columns must equal b's rows";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (m == 0 || n == 0) return nullptr;
  if (m > kreg::kTiledMatmulMaxRows) return "more than 65535 * 16 rows";
  matmul_tiled<T><<<kreg::tiled_matmul_grid(m, n), kreg::tiled_matmul_block(), 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const T*>(a.data), static_cast<const T*>(b.data), static_cast<T*>(c.data), m, k, n);
  return kreg::last_launch_error();
}

}  // namespace

KREG_API const char* matmul_f32(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* s) { return launch<float>(c, a, b, s); }
KREG_API const char* matmul_f16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* s) { return launch<__half>(c, a, b, s); }
KREG_API const char* matmul_bf16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void* s) { return launch<__nv_bfloat16>(c, a, b, s); }
