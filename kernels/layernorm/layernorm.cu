// layernorm on CUDA, per row: mean, var = mean((x - mean)^2), rstd = 1 /
// sqrt(var + eps), y = (x - mean) * rstd * w + b; mean and rstd in float32.
// The float64 reference is reference.py's layernorm; torch's layer_norm is
// the baseline.
//
// Napkin math: x read once from DRAM, y written once (weight, bias and the
// per-row statistics are small): 2 * n * sizeof(T) bytes, bandwidth-bound;
// ~0.51 ms at 65536 x 4096 f32 on an H200, 0.26 ms in f16/bf16. Target:
// >= 0.9x torch.nn.functional.layer_norm and >= 80 % of a device copy.
//
// Rows that fit in registers (kreg::plan_rows) are loaded once, 4 packs a
// thread (a warp per short row, several rows a block); the mean, the
// centred variance and the write all work on the registers, so the two-pass
// variance (no E[x^2] - E[x]^2 cancellation on rows with a large mean) costs
// no second DRAM read. Longer rows loop through L2 (layernorm_long).
#include "kreg/cuda.cuh"

namespace {

constexpr char kOp[] = "layernorm";

template <typename T, int N>
__device__ __forceinline__ kreg::Pack<T, N> normalize(const kreg::Pack<T, N>& v, const kreg::Pack<T, N>* w,
                                                      const kreg::Pack<T, N>* b, int64_t p, float mu, float rs) {
  const kreg::Pack<T, N> wv = w[p];
  kreg::Pack<T, N> out;
  if (b != nullptr) {
    const kreg::Pack<T, N> bv = b[p];
#pragma unroll
    for (int l = 0; l < N; ++l) {
      out.v[l] = kreg::from_float<T>((kreg::acc_at(v, l) - mu) * rs * kreg::acc_at(wv, l) + kreg::acc_at(bv, l));
    }
  } else {
#pragma unroll
    for (int l = 0; l < N; ++l) out.v[l] = kreg::from_float<T>((kreg::acc_at(v, l) - mu) * rs * kreg::acc_at(wv, l));
  }
  return out;
}

template <typename T, int N, int P>
__global__ void __launch_bounds__(1024) layernorm_cached(const T* __restrict__ x, const T* __restrict__ w,
                                                         const T* __restrict__ b, T* __restrict__ y,
                                                         float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                                         int64_t rows, int64_t cols, float eps) {
  using V = kreg::Pack<T, N>;
  __shared__ float scratch[32];
  const auto [row, live, offset] = kreg::cached_row(rows, cols);
  const int64_t packs = cols / N;
  const V* xr = reinterpret_cast<const V*>(x + offset);
  V* yr = reinterpret_cast<V*>(y + offset);
  V v[P];
  float sum = 0;
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t p) {
    v[i] = kreg::load_once(xr + p);
#pragma unroll
    for (int l = 0; l < N; ++l) sum += kreg::acc_at(v[i], l);
  });
  const float mu = kreg::row_sum(sum, scratch) / float(cols);
  float var = 0;
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t) {
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const float d = kreg::acc_at(v[i], l) - mu;
      var += d * d;
    }
  });
  const float rs = rsqrtf(kreg::row_sum(var, scratch) / float(cols) + eps);
  const auto* wr = reinterpret_cast<const V*>(w);
  const auto* br = reinterpret_cast<const V*>(b);
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t p) {
    kreg::store_once(yr + p, normalize<T, N>(v[i], wr, br, p, mu, rs));
  });
  if (live && threadIdx.x == 0) {
    mean_out[row] = mu;
    rstd_out[row] = rs;
  }
}

template <typename T, int N>
__global__ void layernorm_long(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                               T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out,
                               int64_t cols, float eps) {
  using V = kreg::Pack<T, N>;
  __shared__ float scratch[32];
  const V* xr = reinterpret_cast<const V*>(x + blockIdx.x * cols);
  V* yr = reinterpret_cast<V*>(y + blockIdx.x * cols);
  const int64_t packs = cols / N;
  float sum = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) sum += kreg::acc_at(v, l);
  }
  const float mu = kreg::block_sum(sum, scratch) / float(cols);
  float var = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const float d = kreg::acc_at(v, l) - mu;
      var += d * d;
    }
  }
  const float rs = rsqrtf(kreg::block_sum(var, scratch) / float(cols) + eps);
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    yr[p] = normalize<T, N>(xr[p], reinterpret_cast<const V*>(w), reinterpret_cast<const V*>(b), p, mu, rs);
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
    return "weight and bias must have as many elements as x's last dim";
  }
  if (rows == 0 || cols == 0) return nullptr;
  if (const char* refused = kreg::refuse_rows<kOp>(rows)) return refused;
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
  kreg::launch_rows<T>(packs, rows, cols, [&](auto n, auto p, dim3 grid, dim3 block) {
    constexpr int N = decltype(n)::value, P = decltype(p)::value;
    if constexpr (P > 0) {
      layernorm_cached<T, N, P><<<grid, block, 0, s>>>(xs, ws, bs, ys, ms, rs, rows, cols, eps);
    } else {
      layernorm_long<T, N><<<grid, block, 0, s>>>(xs, ws, bs, ys, ms, rs, cols, eps);
    }
  });
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
