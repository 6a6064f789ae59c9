// The element operation, in float whatever the storage dtype: half and
// bfloat16 inputs are widened, computed in float, and rounded once on store.
#pragma once

#include "axpy_cubin/config.h"

#ifdef __CUDACC__
#define AXPY_HD __device__ __forceinline__
#else
#define AXPY_HD inline
#endif

AXPY_HD float axpy_element(float alpha, float x, float y) { return alpha * x + y + AXPY_BIAS; }
