// rowmax on CUDA: per row, the largest value and the first index holding it
// (a NaN counts as the largest, as in torch.max).
//
// Napkin math: x is read once; the outputs are one value and one int64 per
// row: n * sizeof(T) bytes, bandwidth-bound. Target: >= 80 % of a device
// copy's read bandwidth at 65536 x 4096.
//
// One block per row, 16-byte packs; each thread keeps its (value, index)
// best, then warp shuffles and one shared-memory step merge them, preferring
// the larger value and, on ties, the smaller index.
#include "kreg/cuda.cuh"

namespace {

struct Best {
  float value;
  int64_t index;
};

__device__ __forceinline__ bool better(float v, int64_t i, const Best& b) {
  const bool v_nan = isnan(v), b_nan = isnan(b.value);
  if (v_nan != b_nan) return v_nan;
  if (v_nan) return i < b.index;
  return v > b.value || (v == b.value && i < b.index);
}

__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, b.value, offset);
    const int64_t i = __shfl_xor_sync(0xffffffffu, b.index, offset);
    if (better(v, i, b)) b = Best{v, i};
  }
  return b;
}

template <typename T, int N>
__global__ void rowmax_rows(const T* __restrict__ x, T* __restrict__ values, int64_t* __restrict__ indices,
                            int64_t cols) {
  __shared__ Best scratch[32];
  const auto* xr = reinterpret_cast<const kreg::Pack<T, N>*>(x + blockIdx.x * cols);
  const int64_t packs = cols / N;
  Best b{-INFINITY, INT64_MAX};
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const float f = kreg::to_float(v.v[l]);
      if (better(f, p * N + l, b)) b = Best{f, p * N + l};
    }
  }
  b = warp_best(b);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  if (warp == 0) {
    b = threadIdx.x < (blockDim.x >> 5) ? scratch[threadIdx.x] : Best{-INFINITY, INT64_MAX};
    b = warp_best(b);
    if (threadIdx.x == 0) {
      // A row of -inf only: index 0, as torch.
      const int64_t at = b.index == INT64_MAX ? 0 : b.index;
      values[blockIdx.x] = x[blockIdx.x * cols + at];
      indices[blockIdx.x] = at;
    }
  }
}

template <typename T>
const char* launch(kreg_tensor values, kreg_tensor indices, kreg_tensor x, void* stream) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (cols == 0 && values.numel > 0) return "rowmax: rows of length 0 have no maximum";
  if (rows == 0) return nullptr;
  if (rows > 0x7fffffff) return "rowmax: more than 2^31 - 1 rows";
  constexpr int kWidth = kreg::pack_width<T>();
  auto s = static_cast<cudaStream_t>(stream);
  const T* xs = static_cast<const T*>(x.data);
  T* vs = static_cast<T*>(values.data);
  auto* is = static_cast<int64_t*>(indices.data);
  if (kreg::packs_fit(xs, cols, kWidth)) {
    rowmax_rows<T, kWidth><<<static_cast<unsigned>(rows), kreg::row_threads(cols / kWidth), 0, s>>>(xs, vs, is, cols);
  } else {
    rowmax_rows<T, 1><<<static_cast<unsigned>(rows), kreg::row_threads(cols), 0, s>>>(xs, vs, is, cols);
  }
  return kreg::last_launch_error();
}

}  // namespace

KREG_API const char* rowmax_f32(kreg_tensor v, kreg_tensor i, kreg_tensor x, void* s) { return launch<float>(v, i, x, s); }
KREG_API const char* rowmax_f16(kreg_tensor v, kreg_tensor i, kreg_tensor x, void* s) { return launch<__half>(v, i, x, s); }
KREG_API const char* rowmax_bf16(kreg_tensor v, kreg_tensor i, kreg_tensor x, void* s) { return launch<__nv_bfloat16>(v, i, x, s); }
