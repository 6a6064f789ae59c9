// The type a kernel accumulates in, for CPU and CUDA kernels alike (cpu.h and
// cuda.cuh include it; their to_acc / from_acc convert to and from it):
// float for every storage type narrower than double, double for double, so a
// float64 build can pass gradcheck. Plain C++, no header of its own needed.
#pragma once

namespace kreg {

template <typename T>
struct Accumulator {
  using type = float;
};
template <>
struct Accumulator<double> {
  using type = double;
};
template <typename T>
using acc_t = typename Accumulator<T>::type;

}  // namespace kreg
