// The launcher both dtypes' units share: it checks the operands and picks the
// path per call. On Hopper (compute capability 9.x) a CUTLASS warp-specialized
// TMA/wgmma kernel (hopper.cuh), its tile, cluster and schedule a [tune] config;
// elsewhere, and for operands TMA cannot take, the portable tiled kernel
// (fallback.cuh).
#pragma once

#include "gemm/fallback.cuh"
#include "gemm/hopper.cuh"
#include "kreg/cuda.cuh"

namespace gemm {

// The compute capability's major, asked once per device.
inline int major_of(int device) {
  static int majors[64] = {};
  if (device < 0 || device >= 64) return 0;
  if (majors[device] == 0) cudaDeviceGetAttribute(&majors[device], cudaDevAttrComputeCapabilityMajor, device);
  return majors[device];
}

template <typename T, typename Cutlass>
const char* launch(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias, float alpha,
                   float beta, void* stream) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (b.sizes[0] != k) return "a's columns must equal b's rows";
  if (c.data != nullptr && !(c.ndim == 2 && c.sizes[0] == m && c.sizes[1] == n)) return "c must be [m, n]";
  if (bias.data != nullptr && !(bias.ndim == 1 && bias.sizes[0] == n)) return "bias must be [n]";
  if (m == 0 || n == 0) return nullptr;
  auto s = static_cast<cudaStream_t>(stream);
  int device = 0;
  cudaGetDevice(&device);
  const bool fits_int = m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31);
  if (major_of(device) == 9 && fits_int &&
      hopper_fits(a.data, b.data, c.data, bias.data, d.data, k, n, sizeof(T))) {
    return run_hopper<Cutlass>(static_cast<Cutlass*>(d.data), static_cast<const Cutlass*>(a.data),
                               static_cast<const Cutlass*>(b.data), static_cast<const Cutlass*>(c.data),
                               static_cast<const Cutlass*>(bias.data), alpha, beta, static_cast<int>(m),
                               static_cast<int>(n), static_cast<int>(k), s);
  }
  return run_tiled<T>(static_cast<T*>(d.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data),
                      static_cast<const T*>(c.data), static_cast<const T*>(bias.data), alpha, beta, m, n, k, s);
}

}  // namespace gemm
