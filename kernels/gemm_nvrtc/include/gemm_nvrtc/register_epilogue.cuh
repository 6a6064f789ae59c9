// The GEMM's epilogue: d = epilogue(alpha * acc + beta * c + bias[col]),
// written from the accumulators' registers straight to global memory, as
// CUTLASS's DefaultEpilogue does under its NoSmemWarpSpecialized schedule,
// with the per-column bias and the epilogue hook that DefaultEpilogue lacks.
//
// Why not CUTLASS's fused TMA epilogue (TmaWarpSpecializedCooperative with
// LinCombPerColBiasEltAct, what kernels/gemm uses): an epilogue edit relinks
// the kernel, and NVVM's time on it is the edit's time: with this epilogue
// the kernel links in half the time (bench/gemm_epilogue_nvvm.py,
// bench/results/gemm_epilogue_nvvm-cpu.md). Its stores are 4-byte pairs of
// columns in place of TMA's tile stores; its speed beside cuBLAS is measured
// by bench/gemm_edit_loop.py --speed, and GEMM_TMA_EPILOGUE=1 (types.cuh)
// builds the TMA epilogue instead, for that comparison (--tma-epilogue).
#pragma once


#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/numeric_conversion.h"

namespace gemm_nvrtc {

__device__ float epilogue(float value);  // gemm_epilogue.cu, linked into the kernels

template <class Element, class Stride>
class RegisterEpilogue {
 public:
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementOutput = Element;
  using ElementC = Element;
  using ElementD = Element;
  using StrideC = Stride;
  using StrideD = Stride;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  struct SharedStorage {};
  using TensorStorage = SharedStorage;

  // Named as CUTLASS's fusion arguments (args.epilogue.thread.alpha, ...), so
  // the host launcher fills either epilogue alike.
  struct ThreadArguments {
    float alpha = 1.0f;
    float beta = 0.0f;                 // c is read only when beta != 0
    Element const* bias_ptr = nullptr;  // [n], or none
  };
  struct Arguments {
    ThreadArguments thread{};
    Element const* ptr_C = nullptr;
    StrideC dC{};
    Element* ptr_D = nullptr;
    StrideD dD{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  // Pairs of columns are stored whole: an even n, and d and c 4-byte aligned
  // with even row strides (the launcher's 16-byte rule implies all three).
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto even = [](auto x) { return x % 2 == 0; };
    auto aligned = [](void const* p) { return reinterpret_cast<uintptr_t>(p) % (2 * sizeof(Element)) == 0; };
    return even(cute::get<1>(problem_shape)) && aligned(args.ptr_D) && aligned(args.ptr_C) &&
           even(cute::get<0>(args.dD)) && even(cute::get<0>(args.dC));
  }

  CUTLASS_HOST_DEVICE explicit RegisterEpilogue(Params const& params, SharedStorage const& = SharedStorage())
      : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return params_.thread.beta != 0.0f; }

  // The signature of CUTLASS's DefaultEpilogue::operator(), which
  // Sm90TmaWarpSpecializedAdapter calls once per output tile.
  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    using X = Underscore;
    static_assert(is_static<FrgLayout>::value, "the accumulators' layout must be static");

    auto M = get<0>(problem_shape_mnkl);
    auto N = get<1>(problem_shape_mnkl);
    auto L = get<3>(problem_shape_mnkl);
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;

    // This thread's elements of the tile, in the accumulators' order.
    Tensor mC = make_tensor(make_gmem_ptr(params_.ptr_C), make_shape(M, N, L), params_.dC);
    Tensor mD = make_tensor(make_gmem_ptr(params_.ptr_D), make_shape(M, N, L), params_.dD);
    Tensor gC = local_tile(mC, blk_shape_MNK, make_coord(_, _, _), Step<_1, _1, X>{})(_, _, m_coord, n_coord, l_coord);
    Tensor gD = local_tile(mD, blk_shape_MNK, make_coord(_, _, _), Step<_1, _1, X>{})(_, _, m_coord, n_coord, l_coord);
    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor tCgC = thr_mma.partition_C(gC);
    Tensor tCgD = thr_mma.partition_C(gD);
    // Each element's (row, column) in the whole of d: the bounds and the bias's index.
    Tensor cD =
        local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_MNK), make_coord(m_coord, n_coord));
    Tensor tCcD = thr_mma.partition_C(cD);
    CUTE_STATIC_ASSERT_V(size(tCgD) == size(accumulators), "one accumulator per element of d");
    static_assert(decltype(size(accumulators))::value % 2 == 0, "elements are taken in pairs");

    float const alpha = params_.thread.alpha;
    float const beta = params_.thread.beta;
    bool const source = beta != 0.0f;
    Element const* bias = params_.thread.bias_ptr;
    cutlass::NumericConverter<Element, float> to_element;
    cutlass::NumericConverter<float, Element> to_float;

    using Pair = cutlass::AlignedArray<Element, 2>;  // 4-byte aligned: one load or store
    auto value = [&](float acc, Element c, int col) {  // c: read only when source
      float v = alpha * acc;
      if (source) v = fmaf(beta, to_float(c), v);
      if (bias != nullptr) v += to_float(bias[col]);
      return to_element(epilogue(v));
    };

    // A pair of neighbouring columns from an even one (what wgmma's accumulator
    // layout holds side by side) is one 4-byte load and store; under
    // can_implement's conditions it is aligned, and in bounds or out as a whole.
    bool pairs = true;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); i += 2) {
      pairs &= &tCgD(i + 1) == &tCgD(i) + 1 && &tCgC(i + 1) == &tCgC(i) + 1 && get<1>(tCcD(i)) % 2 == 0;
    }
    if (pairs) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accumulators); i += 2) {
        if (!elem_less(tCcD(i), make_coord(M, N))) continue;
        Pair c2;
        if (source) {
          c2 = *reinterpret_cast<Pair const*>(&tCgC(i));
        } else {
          c2.fill(Element(0.0f));
        }
        Pair d2;
        d2[0] = value(accumulators(i), c2[0], get<1>(tCcD(i)));
        d2[1] = value(accumulators(i + 1), c2[1], get<1>(tCcD(i)) + 1);
        *reinterpret_cast<Pair*>(&tCgD(i)) = d2;
      }
    } else {  // a layout this epilogue was not written for: correct, one element at a time
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accumulators); ++i) {
        if (elem_less(tCcD(i), make_coord(M, N))) {
          tCgD(i) = value(accumulators(i), source ? tCgC(i) : Element(0.0f), get<1>(tCcD(i)));
        }
      }
    }
  }

 private:
  Params params_;
};

}  // namespace gemm_nvrtc
