// The Hopper GEMM's types, shared by the device code (NVRTC) and the host
// launcher (nvcc): kernels/gemm's mainloop (hopper.cuh), with an epilogue from
// registers (register_epilogue.cuh) whose last step is a hook,
// gemm_nvrtc::epilogue (gemm_epilogue.cu), so an epilogue edit changes no type
// and leaves the prelude's instantiations valid.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "gemm_nvrtc/register_epilogue.cuh"

#ifndef GEMM_TILE_M
#define GEMM_TILE_M 128
#endif
#ifndef GEMM_TILE_N
#define GEMM_TILE_N 256
#endif
#ifndef GEMM_CLUSTER_M
#define GEMM_CLUSTER_M 2
#endif
#ifndef GEMM_CLUSTER_N
#define GEMM_CLUSTER_N 1
#endif
#ifndef GEMM_PINGPONG  // 0: cooperative (two warp groups share a tile), 1: ping-pong (one tile each)
#define GEMM_PINGPONG 0
#endif
#ifndef GEMM_TMA_EPILOGUE  // 1: CUTLASS's fused TMA epilogue (kernels/gemm's), to compare speed and NVVM time
#define GEMM_TMA_EPILOGUE 0
#endif

namespace gemm_nvrtc {

using namespace cute;

// The host launcher (nvcc) and the device code (NVRTC) must lay out the
// kernel's Params alike; its TMA descriptors set the alignment (nvrtc_std.cuh).
static_assert(alignof(cute::TmaDescriptor) == (__CUDACC_VER_MAJOR__ >= 13 ? 128 : 64) &&
                  sizeof(cute::TmaDescriptor) == 128,
              "cute::TmaDescriptor's layout differs from CUDA's CUtensorMap: see gemm_nvrtc/nvrtc_std.cuh");

// d = epilogue(alpha * acc + beta * c + bias), per element, in f32. Declared
// in register_epilogue.cuh, defined in gemm_epilogue.cu (a unit linked into
// the kernels).

#if GEMM_TMA_EPILOGUE
// The activation slot of CUTLASS's fused epilogue, applied to each fragment.
template <class T>
struct Epilogue {
  __device__ T operator()(T const& value) const { return epilogue(value); }
};
template <class T, int N>
struct Epilogue<cutlass::Array<T, N>> {
  __device__ cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& values) const {
    cutlass::Array<T, N> out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = epilogue(values[i]);
    return out;
  }
};
#endif

template <typename Element>
struct Hopper {
  using Row = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(Element);  // TMA: 16-byte rows
  using TileShape = Shape<Int<GEMM_TILE_M>, Int<GEMM_TILE_N>, _64>;
  using ClusterShape = Shape<Int<GEMM_CLUSTER_M>, Int<GEMM_CLUSTER_N>, _1>;
  using MainloopSchedule = cute::conditional_t<GEMM_PINGPONG, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                               cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
#if GEMM_TMA_EPILOGUE
  using EpilogueSchedule = cute::conditional_t<GEMM_PINGPONG, cutlass::epilogue::TmaWarpSpecialized,
                                               cutlass::epilogue::TmaWarpSpecializedCooperative>;
  using Fusion = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Epilogue, Element, float, Element, Element, float>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, Row, kAlign, Element, Row, kAlign,
      EpilogueSchedule, Fusion>::CollectiveOp;
#else
  using CollectiveEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
      RegisterEpilogue<Element, cutlass::detail::TagToStrideC_t<Row>>>;
#endif
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, Row, kAlign, Element, Row, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, CollectiveEpilogue,
                                                      cutlass::gemm::PersistentScheduler>;
};

using KernelBf16 = Hopper<cutlass::bfloat16_t>::Kernel;
using KernelF16 = Hopper<cutlass::half_t>::Kernel;

}  // namespace gemm_nvrtc
