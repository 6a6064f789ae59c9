// axpy's device code, compiled by nvcc -cubin: out = alpha * x + y.
//
// Napkin math: 3 * n * sizeof(T) bytes move and there is one FMA per element,
// so this is bandwidth-bound (n = 2^28 f32: 3 GiB at ~4.2 TB/s is ~0.77 ms).
// Every thread moves 16-byte vectors and keeps several in flight; the scalar
// kernel takes the tail, or everything when a pointer is misaligned.
// Kernels are extern "C" so the launcher finds them by a plain name.
#include <cstdint>

#include "axpy_math.h"
#include "axpy_shape.h"
#include "kreg/device.cuh"

namespace {

template <typename T>
struct alignas(AXPY_VECTOR_BYTES) Vector {
  static constexpr int kLanes = AXPY_VECTOR_BYTES / sizeof(T);
  T lane[kLanes];
};

template <typename T>
__device__ void vectorized(const Vector<T>* __restrict__ x, const Vector<T>* __restrict__ y,
                           Vector<T>* __restrict__ out, int64_t vectors, float alpha) {
  constexpr int kPerThread = AXPY_VECTORS_PER_THREAD;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * AXPY_THREADS * kPerThread + threadIdx.x;
  Vector<T> xv[kPerThread], yv[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {  // all loads first: several vectors in flight per thread
    const int64_t i = base + static_cast<int64_t>(u) * AXPY_THREADS;
    if (i < vectors) {
      xv[u] = x[i];
      yv[u] = y[i];
    }
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = base + static_cast<int64_t>(u) * AXPY_THREADS;
    if (i < vectors) {
      Vector<T> r;
#pragma unroll
      for (int l = 0; l < Vector<T>::kLanes; ++l) {
        r.lane[l] = kreg::from_float<T>(
            axpy_element(alpha, kreg::to_float(xv[u].lane[l]), kreg::to_float(yv[u].lane[l])));
      }
      out[i] = r;
    }
  }
}

template <typename T>
__device__ void scalar(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, int64_t begin,
                       int64_t n, float alpha) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = kreg::from_float<T>(axpy_element(alpha, kreg::to_float(x[i]), kreg::to_float(y[i])));
  }
}

}  // namespace

// Parameters are void pointers so the host launcher, which has no __half,
// passes the same argument list for every dtype.
#define AXPY_KERNELS(suffix, T)                                                                          \
  extern "C" __global__ void __launch_bounds__(AXPY_THREADS)                                          \
      axpy_vectorized_##suffix(const void* x, const void* y, void* out, int64_t vectors, float alpha) { \
    vectorized<T>(static_cast<const Vector<T>*>(x), static_cast<const Vector<T>*>(y),                 \
                  static_cast<Vector<T>*>(out), vectors, alpha);                                      \
  }                                                                                                    \
  extern "C" __global__ void axpy_scalar_##suffix(const void* x, const void* y, void* out,             \
                                                  int64_t begin, int64_t n, float alpha) {             \
    scalar<T>(static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(out), begin, n,      \
              alpha);                                                                                  \
  }

AXPY_KERNELS(f32, float)
AXPY_KERNELS(f16, __half)
AXPY_KERNELS(bf16, __nv_bfloat16)
