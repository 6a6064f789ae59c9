// d = alpha * (a @ b) + beta * c + bias on the CPU: 64 x 64 blocks of d,
// accumulated in float over k with the inner loop over contiguous columns of b.
// For correctness and small shapes; the GPU is where this op is fast.
#include <algorithm>
#include <vector>

#include "kreg/cpu.h"

namespace {

constexpr int64_t kBlock = 64;

template <typename T>
const char* gemm_cpu(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias, float alpha,
                     float beta) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (b.sizes[0] != k) return "a's columns must equal b's rows";
  if (c.data != nullptr && !(c.ndim == 2 && c.sizes[0] == m && c.sizes[1] == n)) return "c must be [m, n]";
  if (bias.data != nullptr && !(bias.ndim == 1 && bias.sizes[0] == n)) return "bias must be [n]";
  const T* as = static_cast<const T*>(a.data);
  const T* bs = static_cast<const T*>(b.data);
  const T* cs = static_cast<const T*>(c.data);
  const T* biases = static_cast<const T*>(bias.data);
  T* ds = static_cast<T*>(d.data);
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
        for (int64_t j = j0; j < j1; ++j) {
          float out = alpha * acc[(i - i0) * kBlock + (j - j0)];
          if (cs != nullptr) out += beta * kreg::to_float(cs[i * n + j]);
          if (biases != nullptr) out += kreg::to_float(biases[j]);
          ds[i * n + j] = kreg::from_float<T>(out);
        }
      }
    }
  }
  return nullptr;
}

}  // namespace

KREG_API const char* gemm_f16(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias,
                              float alpha, float beta, void*) {
  return gemm_cpu<kreg::half>(d, a, b, c, bias, alpha, beta);
}
KREG_API const char* gemm_bf16(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias,
                               float alpha, float beta, void*) {
  return gemm_cpu<kreg::bfloat16>(d, a, b, c, bias, alpha, beta);
}
