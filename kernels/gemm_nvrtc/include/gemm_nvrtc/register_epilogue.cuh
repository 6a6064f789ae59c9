// The GEMM's epilogue: d = epilogue(alpha * acc + beta * c + bias[col]),
// written from the accumulators' registers straight to global memory, as
// CUTLASS's DefaultEpilogue does under its NoSmemWarpSpecialized schedule,
// with the per-column bias and the epilogue hook that DefaultEpilogue lacks.
//
// Why not CUTLASS's fused TMA epilogue (TmaWarpSpecializedCooperative with
// LinCombPerColBiasEltAct, what kernels/gemm uses): an epilogue edit relinks
// the kernel, and NVVM's time on it is the edit's time: with this epilogue
// the kernel links in half the time (bench/gemm_epilogue_nvvm.py,
// bench/results/gemm_epilogue_nvvm-cpu.md). Its stores are 16-byte pieces of
// rows (store_rows) in place of TMA's tile stores: on an H100 0.99x cuBLAS at
// 8192^3, 0.95x at 4096^3 and 16384x1024x4096, where 4-byte pairs of columns
// (GEMM_EPILOGUE_ROWS=0) reached 0.98x, 0.90x and 0.91x in the run after it
// on the same machine (bench/results/gpu-2026-12-06-rows-epilogue/), and
// CUTLASS's TMA epilogue 0.99-1.03x (bench/results/gpu-2026-12-05-register-epilogue/;
// bench/gemm_edit_loop.py --speed, and --define GEMM_TMA_EPILOGUE=1 builds
// the TMA epilogue instead, types.cuh).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/numeric_conversion.h"

// 1: store 16-byte pieces of rows (pairs exchanged within each quad of
// lanes); 0: the pairs of columns (4 bytes) as wgmma leaves them, the
// fallback for a layout store_rows was not written for. Both are checked
// against float64 on Hopper by tests/test_gpu_gemm_nvrtc.py.
#ifndef GEMM_EPILOGUE_ROWS
#define GEMM_EPILOGUE_ROWS 1
#endif

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
  // 16-byte pieces of rows are stored whole (pairs of columns with
  // GEMM_EPILOGUE_ROWS=0): n a multiple of a piece, d and c aligned to it with
  // row strides of whole pieces. The launcher's 16-byte rule implies it.
  static constexpr int kPiece = GEMM_EPILOGUE_ROWS ? 16 / static_cast<int>(sizeof(Element)) : 2;
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto whole = [](int64_t x) { return x % kPiece == 0; };
    auto aligned = [](void const* p) { return reinterpret_cast<uintptr_t>(p) % (kPiece * sizeof(Element)) == 0; };
    return whole(cute::get<1>(problem_shape)) && aligned(args.ptr_D) && aligned(args.ptr_C) &&
           whole(cute::get<0>(args.dD)) && whole(cute::get<0>(args.dC));
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
    bool const source = is_source_needed();
    Element const* bias = params_.thread.bias_ptr;
    cutlass::NumericConverter<Element, float> to_element;
    cutlass::NumericConverter<float, Element> to_float;

    using Pair = cutlass::AlignedArray<Element, 2>;  // 4-byte aligned: one load or store
    // One element of d; c is read only when source, *b (the bias at its column) only when there is a bias.
    auto combine = [&](float acc, Element c, Element const* b) {
      float v = alpha * acc;
      if (source) v = fmaf(beta, to_float(c), v);
      if (bias != nullptr) v += to_float(*b);
      return to_element(epilogue(v));
    };
    auto value = [&](float acc, Element c, int col) { return combine(acc, c, bias + col); };

#if GEMM_EPILOGUE_ROWS
    // A 16-byte piece of a row of d from the accumulators at its columns (col
    // on): c's and the bias's pieces are read whole too.
    auto value16 = [&](auto const& acc8, Element const* c, Element* d, int col) {
      using Piece = cutlass::AlignedArray<Element, kPiece>;
      Piece c16, bias16, d16;
      c16.fill(Element(0.0f));
      if (source) c16 = *reinterpret_cast<Piece const*>(c);
      if (bias != nullptr) bias16 = *reinterpret_cast<Piece const*>(bias + col);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kPiece; ++k) d16[k] = combine(acc8[k], c16[k], bias16.data() + k);
      *reinterpret_cast<Piece*>(d) = d16;
    };
    if (store_rows(accumulators, tCcD, mC, mD, l_coord, value16)) return;
#endif
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
  // GEMM_EPILOGUE_ROWS=1. wgmma's accumulators, for each row a thread holds:
  // pairs of columns (2q, 2q + 1) of every 8-column group, q = lane % 4, so
  // the four threads of a quad hold a row's 8 columns a group. Four groups of
  // a row are exchanged within the quad (a 4 x 4 transpose of pairs by
  // shuffles), after which each thread holds one group, 8 neighbouring
  // columns: one 16-byte store where there were four 4-byte ones, and a warp
  // writes whole 32-byte sectors. Why: the pairs' 4-byte stores write each
  // sector in two halves, and cost 5-9 % of speed beside CUTLASS's TMA
  // epilogue at the shorter k (bench/results/gpu-2026-12-05-register-epilogue/).
  // Returns false, having stored nothing, if the accumulators are not so laid out.
  template <class Acc, class Coords, class TensorC, class TensorD, class L, class Value16>
  CUTLASS_DEVICE static bool store_rows(Acc const& acc, Coords const& coords, TensorC const& mC, TensorD const& mD,
                                        L l, Value16 const& value16) {
    using namespace cute;
    constexpr int V = decltype(size(acc))::value;
    if constexpr (V % 16 != 0 || kPiece != 8) {
      return false;
    } else {
      // The layout above, checked on the coordinates (the compiler folds the
      // check where it holds): values b + 2h + 4j + e, j < 4, at one row,
      // columns col(b + 2h) + 8j + e. Which lane holds which pair is wgmma's
      // (PTX ISA: the m64nNk16 accumulator fragment), not checked here (a
      // check on the lane is not folded, and would double the kernel's code);
      // tests/test_gpu_gemm_nvrtc.py checks the results, whole and partial tiles.
      bool laid_out = true;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < V; ++i) {
        int const base = i - i % 16 + (i % 4) / 2 * 2;
        laid_out &= get<0>(coords(i)) == get<0>(coords(base)) &&
                    get<1>(coords(i)) == get<1>(coords(base)) + (i % 16) / 4 * 8 + i % 2;
      }
      if (!laid_out) return false;
      int const lane = threadIdx.x % 32, q = lane % 4;
      auto pick = [](float const (&x)[4], int k) { return k == 0 ? x[0] : k == 1 ? x[1] : k == 2 ? x[2] : x[3]; };
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < V; b += 16) {
        CUTLASS_PRAGMA_UNROLL
        for (int h = 0; h < 2; ++h) {
          int const base = b + 2 * h;
          float mine0[4], mine1[4];  // this thread's pair in each of the 4 groups
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < 4; ++j) {
            mine0[j] = acc(base + 4 * j);
            mine1[j] = acc(base + 4 * j + 1);
          }
          // Step s: read from quad member (q + s) % 4 its pair of group q.
          float got0[4], got1[4];
          CUTLASS_PRAGMA_UNROLL
          for (int step = 0; step < 4; ++step) {
            int const send = (q - step) & 3, from = (lane & ~3) | ((q + step) & 3);
            got0[step] = __shfl_sync(0xffffffff, pick(mine0, send), from);
            got1[step] = __shfl_sync(0xffffffff, pick(mine1, send), from);
          }
          float row8[8];  // group q's 8 columns, in order: quad member p's pair
          CUTLASS_PRAGMA_UNROLL
          for (int p = 0; p < 4; ++p) {
            row8[2 * p] = pick(got0, (p - q) & 3);
            row8[2 * p + 1] = pick(got1, (p - q) & 3);
          }
          int const row = get<0>(coords(base));
          int const col = get<1>(coords(base)) - 2 * q + 8 * q;  // group q's first column
          if (row < size<0>(mD) && col < size<1>(mD)) {
            value16(row8, &mC(row, col, l), &mD(row, col, l), col);
          }
        }
      }
      return true;
    }
  }

  Params params_;
};

}  // namespace gemm_nvrtc
