// The launch side of row kernels (softmax, the norms, rowmax, quantize): one
// row of the last dimension per block on the looping path, rows_per_block of
// them on the register-cached one (kreg::plan_rows). The refusal of a row
// count the grid cannot index, the choice of pack width, the grid, the
// dispatch on packs per thread and the walk over a thread's cached packs
// (kreg::for_each_cached_pack) live here, so a row kernel's file holds what it
// computes: its kernels, and launchers that check their arguments and say
// which kernel runs for a given pack width N and packs per thread P.
// kreg/cuda.cuh includes it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kreg/cuda.cuh"

namespace kreg {

// Rows are indexed by blockIdx.x (a block a row, or rows_per_block rows a
// block), whose largest value is 2^31 - 1; a launcher refuses more rows,
// before launching or allocating anything:
//   constexpr char kOp[] = "softmax";  // namespace scope: a template argument
//   if (const char* refused = kreg::refuse_rows<kOp>(rows)) return refused;
// The message, "<op>: more than 2^31 - 1 rows", is built once and kept: a
// launcher returns static error strings (kreg/abi.h).
constexpr int64_t kMaxRows = 0x7fffffff;
template <const char* Op>
const char* refuse_rows(int64_t rows) {
  if (rows <= kMaxRows) return nullptr;
  static const std::string message = std::string(Op) + ": more than 2^31 - 1 rows";
  return message.c_str();
}

// The launch of a planned row kernel: the caller's launch(p, grid, block)
// runs its kernel, p a std::integral_constant holding the packs each thread
// caches (1, 2, 4 or 8: its cached kernel's P), or 0 for the looping kernel,
// which takes a block a row with row_threads(packs) threads. Every
// instantiation is compiled, whatever the plan at run time.
template <int P>
using PacksPerThread = std::integral_constant<int, P>;
template <typename Launch>
void launch_row_plan(int64_t rows, int64_t packs, Launch&& launch) {
  RowPlan plan = plan_rows(packs);
  if (plan.packs_per_thread == 0) plan = {0, row_threads(packs), 1};
  const dim3 grid(static_cast<unsigned>((rows + plan.rows_per_block - 1) / plan.rows_per_block));
  const dim3 block(plan.threads, plan.rows_per_block);
  switch (plan.packs_per_thread) {
    case 1: launch(PacksPerThread<1>{}, grid, block); break;
    case 2: launch(PacksPerThread<2>{}, grid, block); break;
    case 4: launch(PacksPerThread<4>{}, grid, block); break;
    case 8: launch(PacksPerThread<8>{}, grid, block); break;
    default: launch(PacksPerThread<0>{}, grid, block);
  }
}

// A row kernel's launch over `rows` rows of `cols` elements of T, read in
// 16-byte packs (N = pack_width<T>()) when `packs` (the launcher's check that
// every tensor's rows fit them, kreg::packs_fit), one element at a time
// (N = 1) otherwise: launch(n, p, grid, block), n and p
// std::integral_constants, e.g.
//   kreg::launch_rows<T>(packs, rows, cols, [&](auto n, auto p, dim3 grid, dim3 block) {
//     constexpr int N = decltype(n)::value, P = decltype(p)::value;
//     if constexpr (P > 0) k_cached<T, N, P><<<grid, block, 0, s>>>(...);
//     else k_long<T, N><<<grid, block, 0, s>>>(...);
//   });
template <int N>
using PackWidth = std::integral_constant<int, N>;
template <typename T, typename Launch>
void launch_rows(bool packs, int64_t rows, int64_t cols, Launch&& launch) {
  const auto planned = [&](auto n) {
    launch_row_plan(rows, cols / decltype(n)::value, [&](auto p, dim3 grid, dim3 block) { launch(n, p, grid, block); });
  };
  if (packs) {
    planned(PackWidth<pack_width<T>()>{});
  } else {
    planned(PackWidth<1>{});
  }
}

// The row of a thread of a register-cached kernel (blockDim.y rows a block)
// and the offset of its first element. A thread past the last row is not
// live: it loads and stores nothing but still takes part in the block's
// barriers (kreg::row_reduce), its offset row 0's so no pointer it forms
// leaves the tensor.
struct CachedRow {
  int64_t row;
  bool live;
  int64_t offset;
};
__device__ __forceinline__ CachedRow cached_row(int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool live = row < rows;
  return {row, live, (live ? row : 0) * cols};
}

// body(i, p) for each of this thread's P packs p = threadIdx.x + i * blockDim.x
// of a register-cached row that the row has (none where the thread is not
// live). The loop is unrolled and body inlined, so a per-pack array indexed
// by i (the row's cached packs) stays in registers.
template <int P, typename Body>
__device__ __forceinline__ void for_each_cached_pack(bool live, int64_t packs, Body&& body) {
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int64_t p = threadIdx.x + i * blockDim.x;
    if (live && p < packs) body(i, p);
  }
}

}  // namespace kreg
