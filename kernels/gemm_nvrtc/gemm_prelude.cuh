// Compiled once per content into NVRTC's precompiled header: the CUTLASS
// headers and, what makes an edit fast, the kernels' instantiations (the
// collectives' mainloop and epilogue code). gemm_device.cu is
// compiled after it when edited; gemm_epilogue.cu is its own unit (linked).
#pragma once

#include "gemm_nvrtc/nvrtc_std.cuh"  // first: CUTLASS's headers use what it declares
#include "gemm_nvrtc/types.cuh"

template void gemm_nvrtc::KernelBf16::operator()(gemm_nvrtc::KernelBf16::Params const&, char*);
template void gemm_nvrtc::KernelF16::operator()(gemm_nvrtc::KernelF16::Params const&, char*);
