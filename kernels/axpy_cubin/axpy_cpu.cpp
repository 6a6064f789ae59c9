// axpy on the CPU: out = alpha * x + y, the same element operation as the
// device code (axpy_math.h), so both backends check against one reference.
#include "axpy_math.h"
#include "kreg/abi.h"
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

KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void*) {
  return axpy_cpu<float>(out, x, y, alpha);
}
KREG_API const char* axpy_f16(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void*) {
  return axpy_cpu<kreg::half>(out, x, y, alpha);
}
KREG_API const char* axpy_bf16(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void*) {
  return axpy_cpu<kreg::bfloat16>(out, x, y, alpha);
}
