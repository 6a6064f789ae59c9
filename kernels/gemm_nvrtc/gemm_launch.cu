// The host launcher (nvcc, once: an edit of the device code does not rebuild
// it): checks the operands, fills CUTLASS's kernel parameters (TMA
// descriptors: cute's make_tma_copy runs only under nvcc) and launches the
// cubin's kernel with its cluster and dynamic shared memory.
#include <cuda_runtime.h>

#include <cstdint>

#include "cutlass/util/packed_stride.hpp"
#include "gemm_nvrtc/types.cuh"
#include "kreg/launch.h"

namespace {

int device_attribute(cudaDeviceAttr what) {
  int device = 0, value = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&value, what, device);
  return value;
}

template <typename K, typename Element>
const char* launch(const char* kernel, kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias,
                   float alpha, float beta, void* stream) {
  if (a.ndim != 2 || b.ndim != 2) return "a and b must be 2-D";
  const int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (b.sizes[0] != k) return "a's columns must equal b's rows";
  if (c.data != nullptr && !(c.ndim == 2 && c.sizes[0] == m && c.sizes[1] == n)) return "c must be [m, n]";
  if (bias.data != nullptr && !(bias.ndim == 1 && bias.sizes[0] == n)) return "bias must be [n]";
  if (m == 0 || n == 0) return nullptr;
  if (device_attribute(cudaDevAttrComputeCapabilityMajor) != 9) {
    return "gemm_nvrtc runs on Hopper (compute capability 9.x) only; use registry.get(\"gemm\") elsewhere";
  }
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int64_t per16 = 16 / sizeof(Element);
  if (!(aligned(a.data) && aligned(b.data) && aligned(c.data) && aligned(bias.data) && aligned(d.data)) ||
      k % per16 != 0 || n % per16 != 0 || k == 0 || m >= (1LL << 31) || n >= (1LL << 31) || k >= (1LL << 31)) {
    return "gemm_nvrtc needs 16-byte aligned operands whose rows are a multiple of 16 bytes, k > 0; "
           "use registry.get(\"gemm\") for other shapes";
  }
  using namespace cute;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  auto stride_a = cutlass::make_cute_packed_stride(typename K::StrideA{}, make_shape(mi, ki, 1));
  auto stride_b = cutlass::make_cute_packed_stride(typename K::StrideB{}, make_shape(ni, ki, 1));
  auto stride_c = cutlass::make_cute_packed_stride(typename K::StrideC{}, make_shape(mi, ni, 1));
  auto stride_d = cutlass::make_cute_packed_stride(typename K::StrideD{}, make_shape(mi, ni, 1));
  auto* dd = static_cast<Element*>(d.data);
  typename K::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                             {mi, ni, ki, 1},
                             {static_cast<const Element*>(a.data), stride_a, static_cast<const Element*>(b.data),
                              stride_b},
                             // Without c, C's TMA descriptor is made over d: with beta = 0 it is never loaded.
                             {{}, c.data != nullptr ? static_cast<const Element*>(c.data) : dd, stride_c, dd,
                              stride_d}};
  args.epilogue.thread.alpha = alpha;
  args.epilogue.thread.beta = c.data != nullptr ? beta : 0.0f;
  args.epilogue.thread.bias_ptr = static_cast<const Element*>(bias.data);
  cudaGetDevice(&args.hw_info.device_id);
  args.hw_info.sm_count = device_attribute(cudaDevAttrMultiProcessorCount);
  if (!K::can_implement(args)) return "CUTLASS cannot run this shape";
  if (K::get_workspace_size(args) != 0) return "this config needs a workspace, which the launcher lacks";
  typename K::Params params = K::to_underlying_arguments(args, nullptr);
  const dim3 grid = K::get_grid_shape(params), block = K::get_block_shape();
  void* argv[] = {&params};
  return kreg_launch_cluster(kernel, kreg_dim3{grid.x, grid.y, grid.z}, kreg_dim3{block.x, block.y, block.z},
                             kreg_dim3{GEMM_CLUSTER_M, GEMM_CLUSTER_N, 1}, K::SharedStorageSize, stream, argv);
}

}  // namespace

KREG_API const char* gemm_bf16(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias,
                              float alpha, float beta, void* s) {
  return launch<gemm_nvrtc::KernelBf16, cutlass::bfloat16_t>("gemm_nvrtc_bf16", d, a, b, c, bias, alpha, beta, s);
}

KREG_API const char* gemm_f16(kreg_tensor d, kreg_tensor a, kreg_tensor b, kreg_tensor c, kreg_tensor bias,
                             float alpha, float beta, void* s) {
  return launch<gemm_nvrtc::KernelF16, cutlass::half_t>("gemm_nvrtc_f16", d, a, b, c, bias, alpha, beta, s);
}
