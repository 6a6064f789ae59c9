// softmax on CUDA: y[r, :] = exp(z - max z) / sum exp(z - max z), z = x[r, :] / temperature.
// The float64 reference is reference.py's softmax; torch.softmax is the baseline.
//
// Napkin math: each element is read once from DRAM and written once: 2 * n *
// sizeof(T) bytes, a few flops per element, so it is bandwidth-bound. At
// 65536 x 4096 f32 (1 GiB in, 1 GiB out) the H200's ~4.2 TB/s copy rate puts
// the floor near 0.51 ms (0.26 ms in f16/bf16); the target is >= 0.9x
// torch.softmax and >= 80 % of a device copy (<= 0.64 ms f32, 0.32 ms f16).
//
// Rows that fit in registers (kreg::plan_rows: up to 8192 16-byte packs)
// are read once into registers, 4 packs a thread, one warp per short row and
// several rows a block; the max, the sum and the write then work on the
// registers, so DRAM sees one read and one write per element however many
// passes the math makes. exp is exp2 of a fused multiply-add (one MUFU op).
// Longer rows take softmax_long: one block a row, three passes re-reading
// the row through L2. Rows whose start or length do not fit 16-byte packs
// take the same kernels one element at a time.
#include "kreg/cuda.cuh"

namespace {

constexpr char kOp[] = "softmax";

// exp(a * scale - b) as exp2: scale and b come pre-multiplied by log2(e).
__device__ __forceinline__ float exp2_fma(float a, float scale, float b) { return exp2f(fmaf(a, scale, -b)); }
__device__ __forceinline__ double exp2_fma(double a, double scale, double b) { return exp2(fma(a, scale, -b)); }

// Two 1024-thread blocks an SM (at most 32 registers a thread) for rows of
// up to 4 16-byte packs a thread: full occupancy hides the latency of the
// two exp passes. Left to itself ptxas took 49-51 registers (f32, bf16)
// against f16's 32, and bf16 ran at 0.77-0.89 of a device copy against
// f16's 0.91-0.97. With the bound they fit without spilling (-Xptxas -v);
// double and the one-element path would spill, so they keep the default.
template <typename T, int N, int P>
__global__ void __launch_bounds__(1024, sizeof(T) < 8 && N > 1 && P <= 4 ? 2 : 1)
    softmax_cached(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, kreg::acc_t<T> temperature) {
  using A = kreg::acc_t<T>;
  using V = kreg::Pack<T, N>;
  __shared__ A scratch[32];
  const auto [row, live, offset] = kreg::cached_row(rows, cols);
  const int64_t packs = cols / N;
  const V* xr = reinterpret_cast<const V*>(x + offset);
  V* yr = reinterpret_cast<V*>(y + offset);
  const A scale = A(1.4426950408889634) / A(temperature);  // log2(e) / temperature

  V v[P];
  A m = -INFINITY;
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t p) {
    v[i] = kreg::load_once(xr + p);
#pragma unroll
    for (int l = 0; l < N; ++l) m = max(m, kreg::acc_at(v[i], l));
  });
  // max(x) * scale is max(x * scale) for scale > 0.
  const A ms = kreg::row_max(m, scratch) * scale;
  A sum = 0;
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t) {
#pragma unroll
    for (int l = 0; l < N; ++l) sum += exp2_fma(kreg::acc_at(v[i], l), scale, ms);
  });
  const A inv_sum = A(1) / kreg::row_sum(sum, scratch);
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t p) {
    V out;
#pragma unroll
    for (int l = 0; l < N; ++l) out.v[l] = kreg::from_acc<T>(exp2_fma(kreg::acc_at(v[i], l), scale, ms) * inv_sum);
    kreg::store_once(yr + p, out);
  });
}

template <typename T, int N>
__global__ void softmax_long(const T* __restrict__ x, T* __restrict__ y, int64_t cols, kreg::acc_t<T> temperature) {
  using A = kreg::acc_t<T>;
  using V = kreg::Pack<T, N>;
  __shared__ A scratch[32];
  const V* xr = reinterpret_cast<const V*>(x + blockIdx.x * cols);
  V* yr = reinterpret_cast<V*>(y + blockIdx.x * cols);
  const int64_t packs = cols / N;
  const A scale = A(1.4426950408889634) / A(temperature);
  A m = -INFINITY;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) m = max(m, kreg::acc_at(v, l));
  }
  const A ms = kreg::block_max(m, scratch) * scale;
  A sum = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) sum += exp2_fma(kreg::acc_at(v, l), scale, ms);
  }
  const A inv_sum = A(1) / kreg::block_sum(sum, scratch);
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p];
    V out;
#pragma unroll
    for (int l = 0; l < N; ++l) out.v[l] = kreg::from_acc<T>(exp2_fma(kreg::acc_at(v, l), scale, ms) * inv_sum);
    yr[p] = out;
  }
}

template <typename T>
const char* launch(kreg_tensor y, kreg_tensor x, double temperature, void* stream) {
  if (!(temperature > 0.0f)) return "temperature must be > 0";
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (rows == 0 || cols == 0) return nullptr;
  if (const char* refused = kreg::refuse_rows<kOp>(rows)) return refused;
  constexpr int kWidth = kreg::pack_width<T>();
  auto s = static_cast<cudaStream_t>(stream);
  const T* xs = static_cast<const T*>(x.data);
  T* ys = static_cast<T*>(y.data);
  const bool packs = kreg::packs_fit(xs, cols, kWidth) && kreg::packs_fit(ys, cols, kWidth);
  kreg::launch_rows<T>(packs, rows, cols, [&](auto n, auto p, dim3 grid, dim3 block) {
    constexpr int N = decltype(n)::value, P = decltype(p)::value;
    if constexpr (P > 0) {
      softmax_cached<T, N, P><<<grid, block, 0, s>>>(xs, ys, rows, cols, temperature);
    } else {
      softmax_long<T, N><<<grid, block, 0, s>>>(xs, ys, cols, temperature);
    }
  });
  return kreg::last_launch_error();
}

}  // namespace

KREG_API const char* softmax_f32(kreg_tensor y, kreg_tensor x, float t, void* s) { return launch<float>(y, x, t, s); }
KREG_API const char* softmax_f16(kreg_tensor y, kreg_tensor x, float t, void* s) { return launch<__half>(y, x, t, s); }
KREG_API const char* softmax_bf16(kreg_tensor y, kreg_tensor x, float t, void* s) { return launch<__nv_bfloat16>(y, x, t, s); }
KREG_API const char* softmax_f64(kreg_tensor y, kreg_tensor x, double t, void* s) { return launch<double>(y, x, t, s); }
