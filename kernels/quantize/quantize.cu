// Row-wise int8 quantisation on CUDA: amax = max|x|, scale = amax / 127,
// q = round-half-even(x * (127 / amax)), 0 for an all-zero row.
//
// Napkin math: x read once, q written at one byte per element:
// n * (sizeof(T) + 1) bytes, bandwidth-bound. Target: >= 80 % of a device
// copy at 65536 x 4096.
//
// One block per row, 16-byte packs: an amax pass (warp shuffles + one
// shared-memory step), then the quantise pass, reading the row again from
// L1/L2 and storing N int8 lanes at once.
#include "kreg/cuda.cuh"

namespace {

template <typename T, int N>
__global__ void quantize_rows(const T* __restrict__ x, int8_t* __restrict__ q, float* __restrict__ scale,
                              int64_t cols) {
  __shared__ float scratch[32];
  const auto* xr = reinterpret_cast<const kreg::Pack<T, N>*>(x + blockIdx.x * cols);
  auto* qr = reinterpret_cast<kreg::Pack<int8_t, N>*>(q + blockIdx.x * cols);
  const int64_t packs = cols / N;
  float amax = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) amax = fmaxf(amax, fabsf(kreg::to_float(v.v[l])));
  }
  amax = kreg::block_max(amax, scratch);
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p];
    kreg::Pack<int8_t, N> out;
#pragma unroll
    for (int l = 0; l < N; ++l) {
      out.v[l] = static_cast<int8_t>(fminf(127.0f, fmaxf(-127.0f, rintf(kreg::to_float(v.v[l]) * inv))));
    }
    qr[p] = out;
  }
  if (threadIdx.x == 0) scale[blockIdx.x] = amax / 127.0f;
}

template <typename T>
const char* launch(kreg_tensor q, kreg_tensor scale, kreg_tensor x, void* stream) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (rows == 0) return nullptr;
  if (rows > 0x7fffffff) return "quantize_int8: more than 2^31 - 1 rows";
  constexpr int kWidth = kreg::pack_width<T>();
  auto s = static_cast<cudaStream_t>(stream);
  const T* xs = static_cast<const T*>(x.data);
  auto* qs = static_cast<int8_t*>(q.data);
  auto* ss = static_cast<float*>(scale.data);
  // q's packs are kWidth bytes: its rows start at multiples of cols, aligned when cols is.
  if (kreg::packs_fit(xs, cols, kWidth) && reinterpret_cast<uintptr_t>(qs) % kWidth == 0) {
    quantize_rows<T, kWidth><<<static_cast<unsigned>(rows), kreg::row_threads(cols / kWidth), 0, s>>>(xs, qs, ss, cols);
  } else {
    quantize_rows<T, 1><<<static_cast<unsigned>(rows), kreg::row_threads(cols), 0, s>>>(xs, qs, ss, cols);
  }
  return kreg::last_launch_error();
}

}  // namespace

KREG_API const char* quantize_int8_f32(kreg_tensor q, kreg_tensor s, kreg_tensor x, void* st) { return launch<float>(q, s, x, st); }
KREG_API const char* quantize_int8_f16(kreg_tensor q, kreg_tensor s, kreg_tensor x, void* st) { return launch<__half>(q, s, x, st); }
KREG_API const char* quantize_int8_bf16(kreg_tensor q, kreg_tensor s, kreg_tensor x, void* st) { return launch<__nv_bfloat16>(q, s, x, st); }
