// layernorm on the CPU, per row: mean, var = mean((x - mean)^2) (two passes,
// stable), rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * w + b.
// mean and rstd are written in float32, one per row. bias is a Tensor?:
// data == NULL when None. The row sums run in double: a sequential float sum
// of thousands of terms drifts by more than float32's tolerance.
#include <cmath>

#include "kreg/cpu.h"

namespace {

template <typename T>
const char* layernorm_cpu(kreg_tensor y, kreg_tensor mean, kreg_tensor rstd, kreg_tensor x, kreg_tensor weight,
                          kreg_tensor bias, float eps) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (weight.numel != cols || (bias.data != nullptr && bias.numel != cols)) {
    return "weight and bias must have as many elements as x's last dim";
  }
  const T* xs = static_cast<const T*>(x.data);
  const T* ws = static_cast<const T*>(weight.data);
  const T* bs = static_cast<const T*>(bias.data);
  T* ys = static_cast<T*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xs + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += kreg::to_float(xr[c]);
    const double mu = sum / double(cols);
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = kreg::to_float(xr[c]) - mu;
      var += d * d;
    }
    const double rs = 1.0 / std::sqrt(var / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      double v = (kreg::to_float(xr[c]) - mu) * rs * kreg::to_float(ws[c]);
      if (bs != nullptr) v += kreg::to_float(bs[c]);
      ys[r * cols + c] = kreg::from_float<T>(static_cast<float>(v));
    }
    static_cast<float*>(mean.data)[r] = static_cast<float>(mu);
    static_cast<float*>(rstd.data)[r] = static_cast<float>(rs);
  }
  return nullptr;
}

}  // namespace

#define LAYERNORM_LAUNCHER(suffix, T)                                                                              \
  KREG_API const char* layernorm_##suffix(kreg_tensor y, kreg_tensor mean, kreg_tensor rstd, kreg_tensor x,       \
                                          kreg_tensor w, kreg_tensor b, float eps, void*) {                       \
    return layernorm_cpu<T>(y, mean, rstd, x, w, b, eps);                                                          \
  }
LAYERNORM_LAUNCHER(f32, float)
LAYERNORM_LAUNCHER(f16, kreg::half)
LAYERNORM_LAUNCHER(bf16, kreg::bfloat16)
