// scale_ on the CPU: x *= a in place, computed in float, rounded once.
#include "kreg/cpu.h"

namespace {

template <typename T>
const char* scale_cpu(kreg_tensor x, float a) {
  T* xs = static_cast<T*>(x.data);
  for (int64_t i = 0; i < x.numel; ++i) xs[i] = kreg::from_float<T>(kreg::to_float(xs[i]) * a);
  return nullptr;
}

}  // namespace

KREG_API const char* scale_inplace_f32(kreg_tensor x, float a, void*) { return scale_cpu<float>(x, a); }
KREG_API const char* scale_inplace_f16(kreg_tensor x, float a, void*) { return scale_cpu<kreg::half>(x, a); }
KREG_API const char* scale_inplace_bf16(kreg_tensor x, float a, void*) { return scale_cpu<kreg::bfloat16>(x, a); }
