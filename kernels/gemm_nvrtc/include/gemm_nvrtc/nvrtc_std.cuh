// What CUTLASS 3.x's SM90 headers take from the C++ standard library that
// NVRTC lacks (it has no standard library; libcu++ is cuda::std): included
// first by the prelude, only under NVRTC.
//   - std::is_pointer_v (cutlass/epilogue/collective/sm90_epilogue_array_tma_warpspecialized.hpp:497)
//   - std::void_t (cutlass/epilogue/thread/linear_combination_bias_elementwise.h:77)
//   - std::tuple_size / tuple_element of a const type: structured bindings of a
//     const cute::tuple (cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp:1031,
//     "too many identifiers"); cute specializes only the non-const ones in std.
// And one layout fix: under NVRTC cute's TmaDescriptor is its own
// `struct alignas(64) { char bytes[128]; }` (cute/arch/copy_sm90_desc.hpp:295),
// while the host launcher (nvcc) gets CUDA's CUtensorMap, alignas(128) since
// CUDA 13. The kernel's Params then differ between the two compilers (1280
// against 1792 bytes for this GEMM) and the kernel reads its TMA descriptors
// from the wrong offsets: a "misaligned address" at the first launch. The
// stand-in is given CUtensorMap's alignment; types.cuh checks it on both sides.
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

// Everything copy_sm90_desc.hpp includes first, so that the alignas below
// reaches only its own two declarations.
#include "cute/arch/config.hpp"
#include "cute/arch/copy.hpp"
#include "cute/arch/util.hpp"
#include "cute/config.hpp"
#include "cute/container/alignment.hpp"
#include "cute/container/array.hpp"
#include "cute/container/bit_field.hpp"
#include "cute/numeric/numeric_types.hpp"
#include "cutlass/arch/synclog.hpp"
#include "cutlass/numeric_types.h"
#if __CUDACC_VER_MAJOR__ >= 13
// (#undef, not push_macro/pop_macro: NVRTC ignores those with a warning, and
// alignas, a keyword, is no macro before this.)
#define alignas(bytes) alignas(128)
#include "cute/arch/copy_sm90_desc.hpp"
#undef alignas
#endif
#endif
