// d = alpha * (a @ b) + beta * c + bias on the CPU: kreg/blocked_matmul.h's
// 64 x 64 blocks, accumulated in float, through this epilogue.
// For correctness and small shapes; the GPU is where this op is fast.
#include "kreg/blocked_matmul.h"
#include "kreg/cpu.h"

namespace {

template <typename T>
const char* gemm_cpu(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias, float alpha,
                     float beta) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (b.sizes[0] != k) return "a's columns must equal b's rows";
  if (c.data != nullptr && !(c.ndim == 2 && c.sizes[0] == m && c.sizes[1] == n)) return "c must be [m, n]";
  if (bias.data != nullptr && !(bias.ndim == 1 && bias.sizes[0] == n)) return "bias must be [n]";
  const T* cs = static_cast<const T*>(c.data);
  const T* biases = static_cast<const T*>(bias.data);
  T* ds = static_cast<T*>(d.data);
  kreg::blocked_matmul(static_cast<const T*>(a.data), static_cast<const T*>(b.data), m, k, n,
                       [&](int64_t i, int64_t j, float sum) {
                         float out = alpha * sum;
                         if (cs != nullptr) out += beta * kreg::to_float(cs[i * n + j]);
                         if (biases != nullptr) out += kreg::to_float(biases[j]);
                         ds[i * n + j] = kreg::from_float<T>(out);
                       });
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
