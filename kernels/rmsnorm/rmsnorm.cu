// rmsnorm on CUDA. Forward, per row r: rstd = 1 / sqrt(mean(x^2) + eps),
// y = x * rstd * w. Backward, with g = grad_y:
//   grad_x = rstd * (g * w) - x * rstd^3 / cols * sum(g * w * x)
//   grad_w = sum over rows of g * x * rstd
// The float64 references are reference.py's; torch.nn.functional.rms_norm is
// the forward's baseline.
//
// Napkin math. Forward: x read once, y written once, w (one row) stays in
// L2: 2 * n * sizeof(T) bytes, bandwidth-bound; at 65536 x 4096 f32 ~0.51 ms
// on an H200 (0.26 ms f16/bf16). Target: >= 0.9x torch's rms_norm and >= 80 %
// of a device copy. Backward: g and x read twice (once for grad_x, once for
// grad_w), grad_x written once: 5 * n * sizeof(T) bytes, ~1.3 ms at 2^28 f32.
//
// Forward: rows that fit in registers (kreg::plan_rows) are loaded once, 4
// packs a thread (a warp per short row, several rows a block), the sum of
// squares reduced across the row, and y written from the registers; longer
// rows loop through L2 (rmsnorm_long). Backward: the same register-cached
// row kernel gives grad_x and each row's rstd; grad_w is then a column sum
// spread over the whole GPU: blocks of 32 column packs x a chunk of rows
// write partial sums, and one small kernel adds the chunks per column; both
// sum in double (tens of thousands of cancelling terms). Fusing the partial
// sums into the row kernel would save the second read of g and x (3n bytes).
#include <algorithm>

#include "kreg/cuda.cuh"

namespace {

constexpr char kOp[] = "rmsnorm";
constexpr char kBackwardOp[] = "rmsnorm_backward";

template <typename T, int N, int P>
__global__ void __launch_bounds__(1024) rmsnorm_cached(const T* __restrict__ x, const T* __restrict__ w,
                                                       T* __restrict__ y, int64_t rows, int64_t cols, kreg::acc_t<T> eps) {
  using A = kreg::acc_t<T>;
  using V = kreg::Pack<T, N>;
  __shared__ A scratch[32];
  const auto [row, live, offset] = kreg::cached_row(rows, cols);
  const int64_t packs = cols / N;
  const V* xr = reinterpret_cast<const V*>(x + offset);
  const V* wr = reinterpret_cast<const V*>(w);
  V* yr = reinterpret_cast<V*>(y + offset);
  V v[P];
  A ss = 0;
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t p) {
    v[i] = kreg::load_once(xr + p);
#pragma unroll
    for (int l = 0; l < N; ++l) ss += kreg::acc_at(v[i], l) * kreg::acc_at(v[i], l);
  });
  const A rstd = A(1) / sqrt(kreg::row_sum(ss, scratch) / A(cols) + A(eps));
  kreg::for_each_cached_pack<P>(live, packs, [&](int i, int64_t p) {
    const V wv = wr[p];
    V out;
#pragma unroll
    for (int l = 0; l < N; ++l) out.v[l] = kreg::from_acc<T>(kreg::acc_at(v[i], l) * rstd * kreg::acc_at(wv, l));
    kreg::store_once(yr + p, out);
  });
}

template <typename T, int N>
__global__ void rmsnorm_long(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t cols,
                             kreg::acc_t<T> eps) {
  using A = kreg::acc_t<T>;
  using V = kreg::Pack<T, N>;
  __shared__ A scratch[32];
  const V* xr = reinterpret_cast<const V*>(x + blockIdx.x * cols);
  const V* wr = reinterpret_cast<const V*>(w);
  V* yr = reinterpret_cast<V*>(y + blockIdx.x * cols);
  const int64_t packs = cols / N;
  A ss = 0;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p];
#pragma unroll
    for (int l = 0; l < N; ++l) ss += kreg::acc_at(v, l) * kreg::acc_at(v, l);
  }
  const A rstd = A(1) / sqrt(kreg::block_sum(ss, scratch) / A(cols) + A(eps));
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const V v = xr[p], wv = wr[p];
    V out;
#pragma unroll
    for (int l = 0; l < N; ++l) out.v[l] = kreg::from_acc<T>(kreg::acc_at(v, l) * rstd * kreg::acc_at(wv, l));
    yr[p] = out;
  }
}

// grad_x and rstd per row; P == 0 loops over the row through L2 instead of
// caching it (rows too long for registers).
template <typename T, int N, int P>
__global__ void __launch_bounds__(1024) rmsnorm_backward_rows(const T* __restrict__ g, const T* __restrict__ x,
                                                              const T* __restrict__ w, T* __restrict__ gx,
                                                              kreg::acc_t<T>* __restrict__ rstds, int64_t rows,
                                                              int64_t cols, kreg::acc_t<T> eps) {
  using A = kreg::acc_t<T>;
  using V = kreg::Pack<T, N>;
  constexpr int kSlots = P > 0 ? P : 1;
  __shared__ A scratch[32];
  const auto [row, live, base] = kreg::cached_row(rows, cols);
  const int64_t packs = cols / N;
  const V* gr = reinterpret_cast<const V*>(g + base);
  const V* xr = reinterpret_cast<const V*>(x + base);
  const V* wr = reinterpret_cast<const V*>(w);
  V* gxr = reinterpret_cast<V*>(gx + base);
  V gv[kSlots], xv[kSlots];
  A ss = 0, dot = 0;
  const auto accumulate = [&](const V& gp, const V& xp, const V& wp) {
#pragma unroll
    for (int l = 0; l < N; ++l) {
      const A xa = kreg::acc_at(xp, l);
      ss += xa * xa;
      dot += kreg::acc_at(gp, l) * kreg::acc_at(wp, l) * xa;
    }
  };
  const auto write = [&](int64_t p, const V& gp, const V& xp, A rstd, A k) {
    const V wp = wr[p];
    V out;
#pragma unroll
    for (int l = 0; l < N; ++l) {
      out.v[l] = kreg::from_acc<T>(rstd * kreg::acc_at(gp, l) * kreg::acc_at(wp, l) - kreg::acc_at(xp, l) * k);
    }
    kreg::store_once(gxr + p, out);
  };
  if constexpr (P > 0) {
    // Plain loops here, not kreg::for_each_cached_pack: around this kernel's
    // own lambdas nvcc 13 emits other (up to 128 bytes longer) code with it.
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int64_t p = threadIdx.x + i * blockDim.x;
      if (live && p < packs) {
        gv[i] = gr[p];
        xv[i] = xr[p];
        accumulate(gv[i], xv[i], wr[p]);
      }
    }
  } else {
    for (int64_t p = threadIdx.x; live && p < packs; p += blockDim.x) accumulate(gr[p], xr[p], wr[p]);
  }
  ss = kreg::row_sum(ss, scratch);
  dot = kreg::row_sum(dot, scratch);
  const A rstd = A(1) / sqrt(ss / A(cols) + A(eps));
  const A k = rstd * rstd * rstd * dot / A(cols);
  if (live && threadIdx.x == 0) rstds[row] = rstd;
  if constexpr (P > 0) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int64_t p = threadIdx.x + i * blockDim.x;
      if (live && p < packs) write(p, gv[i], xv[i], rstd, k);
    }
  } else {
    for (int64_t p = threadIdx.x; live && p < packs; p += blockDim.x) write(p, gr[p], xr[p], rstd, k);
  }
}

// grad_w, step 1: block (32, kChunkThreads) covers 32 column packs; its
// threads walk the rows of chunk blockIdx.y (threadIdx.y-strided, coalesced
// along the row) summing g * x * rstd, then reduce over threadIdx.y into
// partial[chunk, column]. Sums in double: a column adds one rounded term
// per row, and the terms cancel.
constexpr int kChunkThreads = 8;
template <typename T, int N>
__global__ void rmsnorm_grad_weight_partial(const T* __restrict__ g, const T* __restrict__ x,
                                            const kreg::acc_t<T>* __restrict__ rstds, double* __restrict__ partial,
                                            int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  using V = kreg::Pack<T, N>;
  __shared__ double sums[kChunkThreads][32 * N];
  const int64_t p = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x, packs = cols / N;
  const int64_t first = blockIdx.y * rows_per_chunk;
  const int64_t last = min(rows, first + rows_per_chunk);
  double acc[N] = {};
  if (p < packs) {
    for (int64_t r = first + threadIdx.y; r < last; r += kChunkThreads) {
      const V gv = reinterpret_cast<const V*>(g + r * cols)[p];
      const V xv = reinterpret_cast<const V*>(x + r * cols)[p];
      const double rs = rstds[r];
#pragma unroll
      for (int l = 0; l < N; ++l) acc[l] += double(kreg::acc_at(gv, l)) * double(kreg::acc_at(xv, l)) * rs;
    }
  }
#pragma unroll
  for (int l = 0; l < N; ++l) sums[threadIdx.y][threadIdx.x * N + l] = acc[l];
  __syncthreads();
  // Each of the block's 32 * kChunkThreads threads finishes columns of the 32 * N here.
  for (int c = threadIdx.y * 32 + threadIdx.x; c < 32 * N; c += 32 * kChunkThreads) {
    double s = 0;
#pragma unroll
    for (int t = 0; t < kChunkThreads; ++t) s += sums[t][c];
    const int64_t column = static_cast<int64_t>(blockIdx.x) * 32 * N + c;
    if (column < cols) partial[blockIdx.y * cols + column] = s;
  }
}

// grad_w, step 2: one thread per column adds the chunks' partial sums.
template <typename T>
__global__ void rmsnorm_grad_weight_total(const double* __restrict__ partial, T* __restrict__ gw,
                                          int64_t chunks, int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double sum = 0;
  for (int64_t k = 0; k < chunks; ++k) sum += partial[k * cols + c];
  gw[c] = kreg::from_acc<T>(static_cast<kreg::acc_t<T>>(sum));
}

template <typename T>
const char* forward(kreg_tensor y, kreg_tensor x, kreg_tensor w, double eps, void* stream) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (w.numel != cols) return "weight must have as many elements as x's last dim";
  if (rows == 0 || cols == 0) return nullptr;
  if (const char* refused = kreg::refuse_rows<kOp>(rows)) return refused;
  constexpr int kWidth = kreg::pack_width<T>();
  auto s = static_cast<cudaStream_t>(stream);
  const T* xs = static_cast<const T*>(x.data);
  const T* ws = static_cast<const T*>(w.data);
  T* ys = static_cast<T*>(y.data);
  const bool packs =
      kreg::packs_fit(xs, cols, kWidth) && kreg::packs_fit(ys, cols, kWidth) && kreg::packs_fit(ws, cols, kWidth);
  kreg::launch_rows<T>(packs, rows, cols, [&](auto n, auto p, dim3 grid, dim3 block) {
    constexpr int N = decltype(n)::value, P = decltype(p)::value;
    if constexpr (P > 0) {
      rmsnorm_cached<T, N, P><<<grid, block, 0, s>>>(xs, ws, ys, rows, cols, eps);
    } else {
      rmsnorm_long<T, N><<<grid, block, 0, s>>>(xs, ws, ys, cols, eps);
    }
  });
  return kreg::last_launch_error();
}

template <typename T, int N>
void backward_rows(const T* g, const T* x, const T* w, T* gx, T* gw, double* scratch, int64_t rows,
                   int64_t cols, int64_t chunks, double eps, cudaStream_t s) {
  // rstd per row (in acc_t<T>, at most a double's size) in the first `rows` doubles, then the partials.
  auto* rstds = reinterpret_cast<kreg::acc_t<T>*>(scratch);
  double* partial = scratch + rows;
  // P == 0 (rows too long for registers) is the same kernel looping through L2.
  kreg::launch_row_plan(rows, cols / N, [&](auto p, dim3 grid, dim3 block) {
    rmsnorm_backward_rows<T, N, decltype(p)::value><<<grid, block, 0, s>>>(g, x, w, gx, rstds, rows, cols, eps);
  });
  const int64_t column_blocks = (cols / N + 31) / 32;
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  rmsnorm_grad_weight_partial<T, N><<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks)),
                                      dim3(32, kChunkThreads), 0, s>>>(g, x, rstds, partial, rows, cols, rows_per_chunk);
  rmsnorm_grad_weight_total<T><<<static_cast<unsigned>((cols + 255) / 256), 256, 0, s>>>(partial, gw, chunks, cols);
}

template <typename T>
const char* backward(kreg_tensor gx, kreg_tensor gw, kreg_tensor g, kreg_tensor x, kreg_tensor w, double eps,
                     void* stream) {
  const int64_t cols = kreg::row_length(x), rows = kreg::row_count(x);
  if (w.numel != cols) return "weight must have as many elements as x's last dim";
  if (cols == 0) return nullptr;
  if (const char* refused = kreg::refuse_rows<kBackwardOp>(rows)) return refused;
  auto s = static_cast<cudaStream_t>(stream);
  if (rows == 0) return cudaMemsetAsync(gw.data, 0, cols * sizeof(T), s) == cudaSuccess ? nullptr : "rmsnorm_backward: memset failed";
  constexpr int kWidth = kreg::pack_width<T>();
  const T* gs = static_cast<const T*>(g.data);
  const T* xs = static_cast<const T*>(x.data);
  const T* ws = static_cast<const T*>(w.data);
  T* gxs = static_cast<T*>(gx.data);
  T* gws = static_cast<T*>(gw.data);
  const bool packs = kreg::packs_fit(gs, cols, kWidth) && kreg::packs_fit(xs, cols, kWidth) &&
                     kreg::packs_fit(ws, cols, kWidth) && kreg::packs_fit(gxs, cols, kWidth);
  const int width = packs ? kWidth : 1;
  // Enough row chunks that the partial-sum grid fills the GPU twice over, and
  // at least kChunkThreads rows in a chunk.
  const int64_t column_blocks = (cols / width + 31) / 32;
  const int64_t fill = (2 * kreg::resident_blocks(32 * kChunkThreads) + column_blocks - 1) / column_blocks;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(fill, (rows + kChunkThreads - 1) / kChunkThreads));
  double* scratch = nullptr;  // rstd per row, then the chunks' partial grad_w
  if (cudaMallocAsync(reinterpret_cast<void**>(&scratch), (rows + chunks * cols) * sizeof(double), s) != cudaSuccess) {
    return "could not allocate the per-row scratch";
  }
  if (packs) {
    backward_rows<T, kWidth>(gs, xs, ws, gxs, gws, scratch, rows, cols, chunks, eps, s);
  } else {
    backward_rows<T, 1>(gs, xs, ws, gxs, gws, scratch, rows, cols, chunks, eps, s);
  }
  cudaFreeAsync(scratch, s);
  return kreg::last_launch_error();
}

}  // namespace

#define RMSNORM_LAUNCHERS(suffix, T, S)                                                                         \
  KREG_API const char* rmsnorm_##suffix(kreg_tensor y, kreg_tensor x, kreg_tensor w, S eps, void* s) {          \
    return forward<T>(y, x, w, eps, s);                                                                         \
  }                                                                                                             \
  KREG_API const char* rmsnorm_backward_##suffix(kreg_tensor gx, kreg_tensor gw, kreg_tensor gy, kreg_tensor x, \
                                                 kreg_tensor w, S eps, void* s) {                               \
    return backward<T>(gx, gw, gy, x, w, eps, s);                                                               \
  }
// S: the C type of the float argument eps (double in the float64 launchers, kreg/abi.h).
RMSNORM_LAUNCHERS(f32, float, float)
RMSNORM_LAUNCHERS(f16, __half, float)
RMSNORM_LAUNCHERS(bf16, __nv_bfloat16, float)
RMSNORM_LAUNCHERS(f64, double, double)
