// softmax on the CPU: y[r, :] = exp(z - max z) / sum exp(z - max z), z = x[r, :] / temperature.
// Three passes over each row (max, sum, write), accumulating in float (double
// for float64). The launchers' prototypes come from the signature (the
// registry force-includes them), so a mismatch here is a compile error.
#include <cmath>

#include "kreg/cpu.h"

namespace {

template <typename T>
const char* softmax_cpu(kreg_tensor y, kreg_tensor x, double temperature) {
  using A = kreg::acc_t<T>;
  if (!(temperature > 0.0f)) return "temperature must be > 0";
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  const A inv_t = A(1) / A(temperature);
  const T* xs = static_cast<const T*>(x.data);
  T* ys = static_cast<T*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xs + r * cols;
    T* yr = ys + r * cols;
    A m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, kreg::to_acc(xr[c]) * inv_t);
    A sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(kreg::to_acc(xr[c]) * inv_t - m);
    const A inv_sum = A(1) / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] = kreg::from_acc<T>(std::exp(kreg::to_acc(xr[c]) * inv_t - m) * inv_sum);
  }
  return nullptr;
}

}  // namespace

KREG_API const char* softmax_f32(kreg_tensor y, kreg_tensor x, float t, void*) { return softmax_cpu<float>(y, x, t); }
KREG_API const char* softmax_f16(kreg_tensor y, kreg_tensor x, float t, void*) { return softmax_cpu<kreg::half>(y, x, t); }
KREG_API const char* softmax_bf16(kreg_tensor y, kreg_tensor x, float t, void*) { return softmax_cpu<kreg::bfloat16>(y, x, t); }
KREG_API const char* softmax_f64(kreg_tensor y, kreg_tensor x, double t, void*) { return softmax_cpu<double>(y, x, t); }
