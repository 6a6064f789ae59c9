// axpy on CUDA: out = alpha * x + y.
//
// Napkin math: 3 * n * sizeof(T) bytes move (read x, read y, write out) and
// there is one FMA per element, so this is bandwidth-bound: at n = 2^28 f32,
// 3 GiB at ~4.2 TB/s is ~0.77 ms. To get there every thread moves 16-byte
// vectors (4 floats, or 8 halves) and keeps several in flight; 2-byte scalar
// loads leave ~40% of the bandwidth unused. When the three pointers are not
// all 16-byte aligned (a view at an odd offset), a scalar grid-stride loop
// handles the whole range instead.
#include <cstdint>

#include "axpy.h"
#include "kreg/cuda.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kVectorBytes = 16;

template <typename T>
struct alignas(kVectorBytes) Vector {
  static constexpr int kLanes = kVectorBytes / sizeof(T);
  T lane[kLanes];
};

template <typename T>
__global__ void axpy_vectorized(const Vector<T>* __restrict__ x, const Vector<T>* __restrict__ y,
                                Vector<T>* __restrict__ out, int64_t vectors, float alpha) {
  constexpr int kPerThread = AXPY_VECTORS_PER_THREAD;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * kPerThread + threadIdx.x;
  Vector<T> xv[kPerThread], yv[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {  // all loads first: several vectors in flight per thread
    const int64_t i = base + static_cast<int64_t>(u) * kThreads;
    if (i < vectors) {
      xv[u] = x[i];
      yv[u] = y[i];
    }
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = base + static_cast<int64_t>(u) * kThreads;
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

// The elements in [begin, n): the tail after the vectors, or everything when misaligned.
template <typename T>
__global__ void axpy_scalar(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out,
                            int64_t begin, int64_t n, float alpha) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = kreg::from_float<T>(axpy_element(alpha, kreg::to_float(x[i]), kreg::to_float(y[i])));
  }
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

template <typename T>
const char* launch(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const int64_t n = out.numel;
  const auto* xs = static_cast<const T*>(x.data);
  const auto* ys = static_cast<const T*>(y.data);
  auto* os = static_cast<T*>(out.data);
  int64_t vector_elements = 0;
  if (aligned(xs) && aligned(ys) && aligned(os)) {
    const int64_t vectors = n / Vector<T>::kLanes;
    vector_elements = vectors * Vector<T>::kLanes;
    if (vectors > 0) {
      const int64_t per_block = static_cast<int64_t>(kThreads) * AXPY_VECTORS_PER_THREAD;
      const auto blocks = static_cast<unsigned>((vectors + per_block - 1) / per_block);
      axpy_vectorized<T><<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const Vector<T>*>(xs),
                                                           reinterpret_cast<const Vector<T>*>(ys),
                                                           reinterpret_cast<Vector<T>*>(os), vectors, alpha);
    }
  }
  const int64_t rest = n - vector_elements;
  if (rest > 0) {
    const int64_t wanted = (rest + kThreads - 1) / kThreads;
    const auto blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
    axpy_scalar<T><<<blocks, kThreads, 0, stream>>>(xs, ys, os, vector_elements, n, alpha);
  }
  return kreg::last_launch_error();
}

}  // namespace

AXPY_LAUNCHER(f32) { return launch<float>(out, x, y, alpha, stream); }
AXPY_LAUNCHER(f16) { return launch<__half>(out, x, y, alpha, stream); }
AXPY_LAUNCHER(bf16) { return launch<__nv_bfloat16>(out, x, y, alpha, stream); }
