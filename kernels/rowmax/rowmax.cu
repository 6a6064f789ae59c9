// rowmax on CUDA: per row, the largest value and the first index holding it
// (a NaN counts as the largest, as in torch.max). The float64 reference is
// reference.py's rowmax; torch.max(x, dim=-1) is the baseline.
//
// Napkin math: x is read once; the outputs are one value and one int64 per
// row: n * sizeof(T) bytes, bandwidth-bound, ~0.25 ms for 65536 x 4096 f32
// at the H200's ~4.3 TB/s read rate. Target: >= 80 % of a device copy's
// bandwidth (read + write bytes of the copy, read bytes here).
//
// Rows that fit in registers (kreg::plan_rows): every load of a thread is
// issued before any compare, 4 packs a thread (a warp per short row, several
// rows a block). Pass 1 finds the row's largest value (NaN first): each
// thread's by packed max instructions, merged by warp shuffles and one
// shared-memory step. Pass 2 runs only in the threads holding it: the first
// of their elements equal to it, and the smallest of those indices across the
// row. Longer rows loop (rowmax_long), merging (value, index) pairs.
#include <climits>
#include <type_traits>

#include "kreg/cuda.cuh"

namespace {

constexpr char kOp[] = "rowmax";

template <typename I>
struct Best {
  float value;
  I index;
};

// Is (v, i) a better maximum than b? NaN beats numbers; ties (two NaNs
// too) go to the smaller index. Bitwise on the conditions, not && and ||:
// the short-circuit version compiled to ~20 instructions with branches per
// merge, and 16-bit rows, with twice f32's elements per byte, are
// instruction-bound (at 0.78-0.93 of a device copy on an H200).
template <typename I>
__device__ __forceinline__ bool better(float v, I i, const Best<I>& b) {
  const bool v_nan = isnan(v), b_nan = isnan(b.value);
  const bool tie = (v == b.value) | (v_nan & b_nan);
  return (v > b.value) | (v_nan & !b_nan) | (tie & (i < b.index));
}

template <typename I>
__device__ __forceinline__ Best<I> warp_best(Best<I> b) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, b.value, offset);
    const I i = __shfl_xor_sync(0xffffffffu, b.index, offset);
    if (better(v, i, b)) b = Best<I>{v, i};
  }
  return b;
}

// The row's best for every thread of the row (blockDim.x threads; blockDim.y rows a block).
template <typename I>
__device__ __forceinline__ Best<I> row_best(Best<I> b, Best<I>* scratch) {
  b = warp_best(b);
  const int warps = blockDim.x >> 5;
  if (warps == 1) return b;
  Best<I>* row = scratch + threadIdx.y * warps;
  if ((threadIdx.x & 31) == 0) row[threadIdx.x >> 5] = b;
  __syncthreads();
  b = row[0];
  for (int w = 1; w < warps; ++w) {
    if (better(row[w].value, row[w].index, b)) b = row[w];
  }
  return b;  // scratch is not reused: no trailing barrier
}

// Pass 1 of a cached row: the largest element of a pack, NaN when any is NaN.
// 16-bit packs take two elements an instruction (__hmax2_nan): those rows are
// instruction-bound, and tracking the index of the best so far on every
// element (one pass) held bfloat16 at 0.76-0.84 of a device copy on an H200.
template <typename T, int N>
__device__ __forceinline__ float pack_max(const kreg::Pack<T, N>& v) {
  constexpr bool kHalf = std::is_same_v<T, __half>, kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr ((kHalf || kBf16) && N % 2 == 0) {
    using T2 = std::conditional_t<kHalf, __half2, __nv_bfloat162>;
    T2 m;
    memcpy(&m, &v.v[0], sizeof m);
#pragma unroll
    for (int l = 2; l < N; l += 2) {
      T2 w;
      memcpy(&w, &v.v[l], sizeof w);
      m = __hmax2_nan(m, w);
    }
    const float a = kreg::to_float(m.x), b = kreg::to_float(m.y);
    return (a > b) | isnan(a) ? a : b;
  } else {
    float m = -INFINITY;
    bool nan = false;
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const float f = kreg::acc_at(v, l);
      m = fmaxf(m, f);
      nan |= isnan(f);
    }
    return nan ? NAN : m;
  }
}

// Combinations for kreg::row_reduce: the larger value, NaN when either is
// NaN; the smaller index.
struct NanMaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return (a > b) | isnan(a) ? a : b; }
};
struct MinOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return min(a, b); }
};

template <typename T, int N, int P>
__global__ void __launch_bounds__(1024) rowmax_cached(const T* __restrict__ x, T* __restrict__ values,
                                                      int64_t* __restrict__ indices, int64_t rows, int64_t cols) {
  using V = kreg::Pack<T, N>;
  __shared__ float max_scratch[32];
  __shared__ int min_scratch[32];
  const auto [row, live, offset] = kreg::cached_row(rows, cols);
  const int packs = static_cast<int>(cols / N);
  const V* xr = reinterpret_cast<const V*>(x + offset);
  V v[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (live && p < packs) v[i] = kreg::load_once(xr + p);
  }
  // Pass 1: the thread's largest value, then the row's (NaN beats numbers).
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (live && p < packs) m = NanMaxOp{}(m, pack_max(v[i]));
  }
  const float best = kreg::row_reduce(m, max_scratch, NanMaxOp{});
  // Pass 2, only in the threads holding the row's largest value (for random
  // rows, one): the first of their elements equal to it. Scanning backwards,
  // the last match assigned is the first in column order; -0 == +0, so equal
  // zeros go to the first, and the value written is read back at the index.
  int first = INT_MAX;
  if (m == best || (isnan(m) && isnan(best))) {
    const bool nan = isnan(best);
#pragma unroll
    for (int i = P - 1; i >= 0; --i) {
      const int p = threadIdx.x + i * blockDim.x;
      if (live && p < packs) {
#pragma unroll
        for (int l = N - 1; l >= 0; --l) {
          const float f = kreg::acc_at(v[i], l);
          first = (nan ? isnan(f) : f == best) ? p * N + l : first;
        }
      }
    }
  }
  first = kreg::row_reduce(first, min_scratch, MinOp{});
  if (live && threadIdx.x == 0) {
    const int at = first == INT_MAX ? 0 : first;  // INT_MAX only for a row of no elements (refused)
    values[row] = x[row * cols + at];
    indices[row] = at;
  }
}

template <typename T, int N>
__global__ void rowmax_long(const T* __restrict__ x, T* __restrict__ values, int64_t* __restrict__ indices,
                            int64_t cols) {
  __shared__ Best<int64_t> scratch[32];
  const auto* xr = reinterpret_cast<const kreg::Pack<T, N>*>(x + blockIdx.x * cols);
  const int64_t packs = cols / N;
  Best<int64_t> b{-INFINITY, INT64_MAX};
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const kreg::Pack<T, N> v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const float f = kreg::acc_at(v, l);
      if (better(f, p * N + l, b)) b = Best<int64_t>{f, p * N + l};
    }
  }
  b = row_best(b, scratch);
  if (threadIdx.x == 0) {
    const int64_t at = b.index == INT64_MAX ? 0 : b.index;
    values[blockIdx.x] = x[blockIdx.x * cols + at];
    indices[blockIdx.x] = at;
  }
}

template <typename T>
const char* launch(kreg_tensor values, kreg_tensor indices, kreg_tensor x, void* stream) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (cols == 0 && values.numel > 0) return "rows of length 0 have no maximum";
  if (rows == 0) return nullptr;
  if (const char* refused = kreg::refuse_rows<kOp>(rows)) return refused;
  constexpr int kWidth = kreg::pack_width<T>();
  auto s = static_cast<cudaStream_t>(stream);
  const T* xs = static_cast<const T*>(x.data);
  T* vs = static_cast<T*>(values.data);
  auto* is = static_cast<int64_t*>(indices.data);
  kreg::launch_rows<T>(kreg::packs_fit(xs, cols, kWidth), rows, cols, [&](auto n, auto p, dim3 grid, dim3 block) {
    constexpr int N = decltype(n)::value, P = decltype(p)::value;
    if constexpr (P > 0) {
      rowmax_cached<T, N, P><<<grid, block, 0, s>>>(xs, vs, is, rows, cols);
    } else {
      rowmax_long<T, N><<<grid, block, 0, s>>>(xs, vs, is, cols);
    }
  });
  return kreg::last_launch_error();
}

}  // namespace

KREG_API const char* rowmax_f32(kreg_tensor v, kreg_tensor i, kreg_tensor x, void* s) { return launch<float>(v, i, x, s); }
KREG_API const char* rowmax_f16(kreg_tensor v, kreg_tensor i, kreg_tensor x, void* s) { return launch<__half>(v, i, x, s); }
KREG_API const char* rowmax_bf16(kreg_tensor v, kreg_tensor i, kreg_tensor x, void* s) { return launch<__nv_bfloat16>(v, i, x, s); }
