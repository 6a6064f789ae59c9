// axpy's launchers (kreg/abi.h) for the nvcc -cubin device code: host C++,
// compiled without CUDA or torch headers. They pick the vectorized kernel
// when all three pointers are 16-byte aligned, the scalar one for the tail
// or for everything otherwise, and launch them through kreg/launch.h.
#include <cstdint>

#include "axpy_shape.h"
#include "kreg/abi.h"
#include "kreg/launch.h"

namespace {

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % AXPY_VECTOR_BYTES == 0; }

const char* launch(const char* vectorized, const char* scalar, int element_bytes, kreg_tensor out,
                   kreg_tensor x, kreg_tensor y, float alpha, void* stream) {
  const int64_t n = out.numel;
  const int64_t lanes = AXPY_VECTOR_BYTES / element_bytes;
  int64_t vector_elements = 0;
  if (aligned(x.data) && aligned(y.data) && aligned(out.data)) {
    int64_t vectors = n / lanes;
    vector_elements = vectors * lanes;
    if (vectors > 0) {
      const int64_t per_block = static_cast<int64_t>(AXPY_THREADS) * AXPY_VECTORS_PER_THREAD;
      const auto blocks = static_cast<unsigned>((vectors + per_block - 1) / per_block);
      void* args[] = {&x.data, &y.data, &out.data, &vectors, &alpha};
      if (const char* err = kreg_launch(vectorized, {blocks, 1, 1}, {AXPY_THREADS, 1, 1}, 0, stream, args)) {
        return err;
      }
    }
  }
  int64_t rest = n - vector_elements;
  if (rest > 0) {
    const int64_t wanted = (rest + AXPY_THREADS - 1) / AXPY_THREADS;
    const auto blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
    int64_t begin = vector_elements, end = n;
    void* args[] = {&x.data, &y.data, &out.data, &begin, &end, &alpha};
    return kreg_launch(scalar, {blocks, 1, 1}, {AXPY_THREADS, 1, 1}, 0, stream, args);
  }
  return nullptr;
}

}  // namespace

#define AXPY_LAUNCHER(suffix, bytes)                                                                        \
  KREG_API const char* axpy_##suffix(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha,            \
                                     void* stream) {                                                        \
    return launch("axpy_vectorized_" #suffix, "axpy_scalar_" #suffix, bytes, out, x, y, alpha, stream); \
  }

AXPY_LAUNCHER(f32, 4)
AXPY_LAUNCHER(f16, 2)
AXPY_LAUNCHER(bf16, 2)
