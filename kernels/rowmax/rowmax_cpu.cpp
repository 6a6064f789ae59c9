// rowmax on the CPU: per row, the largest value and the first index holding it.
// A NaN counts as the largest (torch's max propagates NaN).
#include <cmath>

#include "kreg/cpu.h"

namespace {

template <typename T>
const char* rowmax_cpu(kreg_tensor values, kreg_tensor indices, kreg_tensor x) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (cols == 0 && values.numel > 0) return "rows of length 0 have no maximum";
  const T* xs = static_cast<const T*>(x.data);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xs + r * cols;
    float best = kreg::to_float(xr[0]);
    int64_t at = 0;
    for (int64_t c = 1; c < cols && !std::isnan(best); ++c) {
      const float v = kreg::to_float(xr[c]);
      if (v > best || std::isnan(v)) {
        best = v;
        at = c;
      }
    }
    static_cast<T*>(values.data)[r] = xr[at];
    static_cast<int64_t*>(indices.data)[r] = at;
  }
  return nullptr;
}

}  // namespace

KREG_API const char* rowmax_f32(kreg_tensor v, kreg_tensor i, kreg_tensor x, void*) { return rowmax_cpu<float>(v, i, x); }
KREG_API const char* rowmax_f16(kreg_tensor v, kreg_tensor i, kreg_tensor x, void*) { return rowmax_cpu<kreg::half>(v, i, x); }
KREG_API const char* rowmax_bf16(kreg_tensor v, kreg_tensor i, kreg_tensor x, void*) { return rowmax_cpu<kreg::bfloat16>(v, i, x); }
