// c = a @ b on the CPU: 64 x 64 blocks of c, accumulated in float over k,
// the inner loop over contiguous columns of b so the compiler vectorizes it.
#include <algorithm>
#include <vector>

#include "kreg/cpu.h"

namespace {

constexpr int64_t kBlock = 64;

template <typename T>
const char* matmul_cpu(kreg_tensor c, kreg_tensor a, kreg_tensor b) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  if (a.sizes[1] != b.sizes[0]) return "a's columns must equal b's rows";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  const T* as = static_cast<const T*>(a.data);
  const T* bs = static_cast<const T*>(b.data);
  T* cs = static_cast<T*>(c.data);
  std::vector<float> acc(kBlock * kBlock);
  for (int64_t i0 = 0; i0 < m; i0 += kBlock) {
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t i1 = std::min(m, i0 + kBlock), j1 = std::min(n, j0 + kBlock);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t i = i0; i < i1; ++i) {
          const float av = kreg::to_float(as[i * k + p]);
          float* row = &acc[(i - i0) * kBlock];
          for (int64_t j = j0; j < j1; ++j) row[j - j0] += av * kreg::to_float(bs[p * n + j]);
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) cs[i * n + j] = kreg::from_float<T>(acc[(i - i0) * kBlock + (j - j0)]);
      }
    }
  }
  return nullptr;
}

}  // namespace

KREG_API const char* matmul_f32(kreg_tensor c, kreg_tensor a, kreg_tensor b, void*) { return matmul_cpu<float>(c, a, b); }
KREG_API const char* matmul_f16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void*) { return matmul_cpu<kreg::half>(c, a, b); }
KREG_API const char* matmul_bf16(kreg_tensor c, kreg_tensor a, kreg_tensor b, void*) { return matmul_cpu<kreg::bfloat16>(c, a, b); }
