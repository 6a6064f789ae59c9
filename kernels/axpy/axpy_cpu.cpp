// axpy on the CPU: out = alpha * x + y. A plain loop the compiler vectorizes
// for float; half and bfloat16 are widened to float per element.
#include "axpy.h"
#include "kreg/cpu.h"

namespace {

template <typename T>
const char* axpy_cpu(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha) {
  const T* xs = static_cast<const T*>(x.data);
  const T* ys = static_cast<const T*>(y.data);
  T* os = static_cast<T*>(out.data);
  for (int64_t i = 0; i < out.numel; ++i) {
    os[i] = kreg::from_float<T>(axpy_element(alpha, kreg::to_float(xs[i]), kreg::to_float(ys[i])));
  }
  return nullptr;
}

}  // namespace

AXPY_LAUNCHER(f32) { return axpy_cpu<float>(out, x, y, alpha); }
AXPY_LAUNCHER(f16) { return axpy_cpu<kreg::half>(out, x, y, alpha); }
AXPY_LAUNCHER(bf16) { return axpy_cpu<kreg::bfloat16>(out, x, y, alpha); }
