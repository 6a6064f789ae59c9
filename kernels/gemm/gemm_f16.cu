// d = alpha * (a @ b) + beta * c + bias on CUDA for float16 (include/gemm/launch.cuh).
// One unit per dtype: the two CUTLASS instantiations compile side by side.
#include "gemm/launch.cuh"

KREG_API const char* gemm_f16(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias,
                              float alpha, float beta, void* s) {
  return gemm::launch<__half, cutlass::half_t>(d, a, b, c, bias, alpha, beta, s);
}
