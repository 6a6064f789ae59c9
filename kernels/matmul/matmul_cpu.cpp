// c = a @ b on the CPU: kreg/blocked_matmul.h's 64 x 64 blocks, accumulated
// in float, stored as they are.
#include "kreg/blocked_matmul.h"
#include "kreg/cpu.h"

namespace {

template <typename T>
const char* matmul_cpu(kreg_tensor c, kreg_tensor a, kreg_tensor b) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  if (a.sizes[1] != b.sizes[0]) return "a's columns must equal b's rows";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  T* cs = static_cast<T*>(c.data);
  kreg::blocked_matmul(static_cast<const T*>(a.data), static_cast<const T*>(b.data), m, k, n,
                       [&](int64_t i, int64_t j, float sum) { cs[i * n + j] = kreg::from_float<T>(sum); });
  return nullptr;
}

}  // namespace

KREG_API const char* matmul_f32(kreg_tensor c, kreg_tensor a, kreg_tensor b, void*) { return matmul_cpu<float>(c, a, b); }
KREG_API const char* matmul_f16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void*) { return matmul_cpu<kreg::half>(c, a, b); }
KREG_API const char* matmul_bf16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void*) { return matmul_cpu<kreg::bfloat16>(c, a, b); }
