// Row-wise int8 quantisation on the CPU: amax = max|x|, scale = amax / 127,
// q = round-half-even(x * (127 / amax)), 0 for an all-zero row.
#include <cmath>

#include "kreg/cpu.h"

namespace {

template <typename T>
const char* quantize_cpu(kreg_tensor q, kreg_tensor scale, kreg_tensor x) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  const T* xs = static_cast<const T*>(x.data);
  auto* qs = static_cast<int8_t*>(q.data);
  auto* ss = static_cast<float*>(scale.data);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xs + r * cols;
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::fmax(amax, std::fabs(kreg::to_float(xr[c])));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      qs[r * cols + c] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(kreg::to_float(xr[c]) * inv))));
    }
    ss[r] = amax / 127.0f;
  }
  return nullptr;
}

}  // namespace

KREG_API const char* quantize_int8_f32(kreg_tensor q, kreg_tensor s, kreg_tensor x, void*) { return quantize_cpu<float>(q, s, x); }
KREG_API const char* quantize_int8_f16(kreg_tensor q, kreg_tensor s, kreg_tensor x, void*) { return quantize_cpu<kreg::half>(q, s, x); }
KREG_API const char* quantize_int8_bf16(kreg_tensor q, kreg_tensor s, kreg_tensor x, void*) { return quantize_cpu<kreg::bfloat16>(q, s, x); }
