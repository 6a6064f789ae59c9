// layernorm on CUDA, per row: mean, var = mean((x - mean)^2), rstd = 1 /
// sqrt(var + eps), y = (x - mean) * rstd * w + b; mean and rstd in float32.
//
// Napkin math: x read once from DRAM, y written once (weight, bias and the
// per-row statistics are small): 2 * n * sizeof(T) bytes, bandwidth-bound.
// Target at 65536 x 4096: >= 0.9x torch.nn.functional.layer_norm, >= 80 % of
// a device copy.
//
// One block per row; three passes over the row with 16-byte packs (mean,
// centred variance, write), the row staying in L1/L2 after the first; sums
// by warp shuffles and one shared-memory step. The two-pass variance avoids
// the cancellation of E[x^2] - E[x]^2 on rows with a large mean.
#include "kreg/cuda.cuh"

namespace {

template <typename T, int N>
__global__ void layernorm_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                               T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out,
                               int64_t cols, float eps) {
  __shared__ float scratch[32];
  const auto* xr = reinterpret_cast<const kreg::Pack<T, N>*>(x + blockIdx.x * cols);
  const auto* wr = reinterpret_cast<const kreg::Pack<T, N>*>(w);
  const auto* br = reinterpret_cast<const kreg::Pack<T, N>*>(b);
  auto* yr = reinterpret_cast<kreg::Pack<T, N>*>(y + blockIdx.x * cols);
  const int64_t packs = cols / N;
  float sum = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) sum += kreg::to_float(v.v[l]);
  }
  const float mu = kreg::block_sum(sum, scratch) / float(cols);
  float var = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const float d = kreg::to_float(v.v[l]) - mu;
      var += d * d;
    }
  }
  const float rs = rsqrtf(kreg::block_sum(var, scratch) / float(cols) + eps);
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p], wv = wr[p];
    kreg::Pack<T, N> out;
    if (b != nullptr) {
      const kreg::Pack<T, N> bv = br[p];
#pragma unroll
      for (int l = 0; l < N; ++l) {
        out.v[l] = kreg::from_float<T>((kreg::to_float(v.v[l]) - mu) * rs * kreg::to_float(wv.v[l]) + kreg::to_float(bv.v[l]));
      }
    } else {
#pragma unroll
      for (int l = 0; l < N; ++l) out.v[l] = kreg::from_float<T>((kreg::to_float(v.v[l]) - mu) * rs * kreg::to_float(wv.v[l]));
    }
    yr[p] = out;
  }
  if (threadIdx.x == 0) {
    mean_out[blockIdx.x] = mu;
    rstd_out[blockIdx.x] = rs;
  }
}

template <typename T>
const char* launch(kreg_tensor y, kreg_tensor mean, kreg_tensor rstd, kreg_tensor x, kreg_tensor w, kreg_tensor b,
                   float eps, void* stream) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (w.numel != cols || (b.data != nullptr && b.numel != cols)) {
    return "layernorm: weight and bias must have as many elements as x's last dim";
  }
  if (rows == 0 || cols == 0) return nullptr;
  if (rows > 0x7fffffff) return "layernorm: more than 2^31 - 1 rows";
  constexpr int kWidth = kreg::pack_width<T>();
  auto s = static_cast<cudaStream_t>(stream);
  const T* xs = static_cast<const T*>(x.data);
  const T* ws = static_cast<const T*>(w.data);
  const T* bs = static_cast<const T*>(b.data);
  T* ys = static_cast<T*>(y.data);
  auto* ms = static_cast<float*>(mean.data);
  auto* rs = static_cast<float*>(rstd.data);
  const bool packs = kreg::packs_fit(xs, cols, kWidth) && kreg::packs_fit(ys, cols, kWidth) &&
                     kreg::packs_fit(ws, cols, kWidth) && (bs == nullptr || kreg::packs_fit(bs, cols, kWidth));
  if (packs) {
    layernorm_rows<T, kWidth><<<static_cast<unsigned>(rows), kreg::row_threads(cols / kWidth), 0, s>>>(
        xs, ws, bs, ys, ms, rs, cols, eps);
  } else {
    layernorm_rows<T, 1><<<static_cast<unsigned>(rows), kreg::row_threads(cols), 0, s>>>(xs, ws, bs, ys, ms, rs, cols, eps);
  }
  return kreg::last_launch_error();
}

}  // namespace

#define LAYERNORM_LAUNCHER(suffix, T)                                                                              \
  KREG_API const char* layernorm_##suffix(kreg_tensor y, kreg_tensor mean, kreg_tensor rstd, kreg_tensor x,       \
                                          kreg_tensor w, kreg_tensor b, float eps, void* s) {                     \
    return launch<T>(y, mean, rstd, x, w, b, eps, s);                                                              \
  }
LAYERNORM_LAUNCHER(f32, float)
LAYERNORM_LAUNCHER(f16, __half)
LAYERNORM_LAUNCHER(bf16, __nv_bfloat16)
