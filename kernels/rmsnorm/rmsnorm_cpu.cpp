// rmsnorm on the CPU. Forward, per row r: rstd = 1 / sqrt(mean(x^2) + eps),
// y = x * rstd * w. Backward, with g = grad_y:
//   grad_x = rstd * (g * w) - x * rstd^3 / cols * sum(g * w * x)
//   grad_w = sum over rows of g * x * rstd
// accumulated in float (double for float64), except grad_w's sum down the
// rows, which is always double: thousands of rows of cancelling terms.
#include <cmath>
#include <vector>

#include "kreg/cpu.h"

namespace {

template <typename T>
const char* forward(kreg_tensor y, kreg_tensor x, kreg_tensor weight, double eps) {
  using A = kreg::acc_t<T>;
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (weight.numel != cols) return "weight must have as many elements as x's last dim";
  const T* xs = static_cast<const T*>(x.data);
  const T* ws = static_cast<const T*>(weight.data);
  T* ys = static_cast<T*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xs + r * cols;
    A ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += kreg::to_acc(xr[c]) * kreg::to_acc(xr[c]);
    const A rstd = A(1) / std::sqrt(ss / A(cols) + A(eps));
    for (int64_t c = 0; c < cols; ++c) ys[r * cols + c] = kreg::from_acc<T>(kreg::to_acc(xr[c]) * rstd * kreg::to_acc(ws[c]));
  }
  return nullptr;
}

template <typename T>
const char* backward(kreg_tensor grad_x, kreg_tensor grad_w, kreg_tensor grad_y, kreg_tensor x, kreg_tensor weight,
                     double eps) {
  using A = kreg::acc_t<T>;
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (weight.numel != cols) return "weight must have as many elements as x's last dim";
  const T* gs = static_cast<const T*>(grad_y.data);
  const T* xs = static_cast<const T*>(x.data);
  const T* ws = static_cast<const T*>(weight.data);
  T* gxs = static_cast<T*>(grad_x.data);
  std::vector<double> gw(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xs + r * cols;
    const T* gr = gs + r * cols;
    A ss = 0, dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const A xv = kreg::to_acc(xr[c]);
      ss += xv * xv;
      dot += kreg::to_acc(gr[c]) * kreg::to_acc(ws[c]) * xv;
    }
    const A rstd = A(1) / std::sqrt(ss / A(cols) + A(eps));
    const A k = rstd * rstd * rstd * dot / A(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const A xv = kreg::to_acc(xr[c]), gv = kreg::to_acc(gr[c]);
      gxs[r * cols + c] = kreg::from_acc<T>(rstd * gv * kreg::to_acc(ws[c]) - xv * k);
      gw[c] += gv * xv * rstd;
    }
  }
  T* gws = static_cast<T*>(grad_w.data);
  for (int64_t c = 0; c < cols; ++c) gws[c] = kreg::from_acc<T>(static_cast<A>(gw[c]));
  return nullptr;
}

}  // namespace

#define RMSNORM_LAUNCHERS(suffix, T, S)                                                                         \
  KREG_API const char* rmsnorm_##suffix(kreg_tensor y, kreg_tensor x, kreg_tensor w, S eps, void*) {            \
    return forward<T>(y, x, w, eps);                                                                            \
  }                                                                                                             \
  KREG_API const char* rmsnorm_backward_##suffix(kreg_tensor gx, kreg_tensor gw, kreg_tensor gy, kreg_tensor x, \
                                                 kreg_tensor w, S eps, void*) {                                 \
    return backward<T>(gx, gw, gy, x, w, eps);                                                                  \
  }
// S: the C type of the float argument eps (double in the float64 launchers, kreg/abi.h).
RMSNORM_LAUNCHERS(f32, float, float)
RMSNORM_LAUNCHERS(f16, kreg::half, float)
RMSNORM_LAUNCHERS(bf16, kreg::bfloat16, float)
RMSNORM_LAUNCHERS(f64, double, double)
