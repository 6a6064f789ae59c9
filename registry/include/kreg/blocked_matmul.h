// The product a @ b of a CPU kernel (kernels/matmul, kernels/gemm's CPU path),
// in 64 x 64 blocks of the output accumulated in float over k, the inner loop
// over contiguous columns of b so the compiler vectorizes it. The kernel says
// what becomes of each sum (its epilogue); the loops are written once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kreg/cpu.h"

namespace kreg {

// For row-major a [m, k] and b [k, n]: store(i, j, sum) once for each i < m,
// j < n, with sum = a[i, :] . b[:, j] accumulated in float.
template <typename T, typename Store>
void blocked_matmul(const T* a, const T* b, int64_t m, int64_t k, int64_t n, Store&& store) {
  constexpr int64_t kBlock = 64;
  std::vector<float> acc(kBlock * kBlock);
  for (int64_t i0 = 0; i0 < m; i0 += kBlock) {
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t i1 = std::min(m, i0 + kBlock), j1 = std::min(n, j0 + kBlock);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t i = i0; i < i1; ++i) {
          const float av = to_float(a[i * k + p]);
          float* row = &acc[(i - i0) * kBlock];
          for (int64_t j = j0; j < j1; ++j) row[j - j0] += av * to_float(b[p * n + j]);
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) store(i, j, acc[(i - i0) * kBlock + (j - j0)]);
      }
    }
  }
}

}  // namespace kreg
