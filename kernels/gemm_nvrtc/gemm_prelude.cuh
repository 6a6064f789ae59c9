// Compiled once per content into NVRTC's precompiled header: the CUTLASS
// headers and, what makes an edit fast, the kernels' instantiations (the
// collectives' mainloop and epilogue code). gemm_device.cu is
// compiled after it when edited; gemm_epilogue.cu is its own unit (linked).
#pragma once

// CUTLASS declares a variable it never reads (cute/atom/copy_traits_sm90_tma.hpp,
// warning 177) in every instantiation: silenced for its headers only (by
// position), so the kernel's own code still warns.
#pragma nv_diag_suppress 177
#include "gemm_nvrtc/nvrtc_std.cuh"  // first: CUTLASS's headers use what it declares
#include "gemm_nvrtc/types.cuh"
#pragma nv_diag_default 177

template void gemm_nvrtc::KernelBf16::operator()(gemm_nvrtc::KernelBf16::Params const&, char*);
template void gemm_nvrtc::KernelF16::operator()(gemm_nvrtc::KernelF16::Params const&, char*);
