// What CUTLASS 3.x's SM90 headers take from the C++ standard library that
// NVRTC lacks (it has no standard library; libcu++ is cuda::std): included
// first by the prelude, only under NVRTC.
//   - std::is_pointer_v (cutlass/epilogue/collective/sm90_epilogue_array_tma_warpspecialized.hpp:497)
//   - std::void_t (cutlass/epilogue/thread/linear_combination_bias_elementwise.h:77)
//   - std::tuple_size / tuple_element of a const type: structured bindings of a
//     const cute::tuple (cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp:1031,
//     "too many identifiers"); cute specializes only the non-const ones in std.
#pragma once

#ifdef __CUDACC_RTC__
#include <cuda/std/__tuple_dir/structured_bindings.h>
#include <cuda/std/type_traits>

namespace std {
template <class T>
inline constexpr bool is_pointer_v = cuda::std::is_pointer_v<T>;
template <class... T>
using void_t = cuda::std::void_t<T...>;
template <class T>
struct tuple_size<const T> : cuda::std::integral_constant<size_t, tuple_size<T>::value> {};
template <size_t I, class T>
struct tuple_element<I, const T> {
  using type = const typename tuple_element<I, T>::type;
};
}  // namespace std
#endif
