// The kernels' body and entry points, by name for the host launcher
// (gemm_launch.cu): CUTLASS's device_kernel, declared extern "C". The prelude
// holds the kernels' instantiations; this file and the epilogue are what an
// edit compiles; the epilogue (gemm_epilogue.cu) is linked in.
#include "gemm_nvrtc/types.cuh"

template <class K>
__device__ __forceinline__ void body(typename K::Params const& params) {
  extern __shared__ char smem[];
  K op;
  op(params, smem);
}

using gemm_nvrtc::KernelBf16;
using gemm_nvrtc::KernelF16;

extern "C" __global__ void __launch_bounds__(KernelBf16::MaxThreadsPerBlock, KernelBf16::MinBlocksPerMultiprocessor)
    gemm_nvrtc_bf16(__grid_constant__ KernelBf16::Params const params) {
  body<KernelBf16>(params);
}

extern "C" __global__ void __launch_bounds__(KernelF16::MaxThreadsPerBlock, KernelF16::MinBlocksPerMultiprocessor)
    gemm_nvrtc_f16(__grid_constant__ KernelF16::Params const params) {
  body<KernelF16>(params);
}
