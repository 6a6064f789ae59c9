// What the launcher and the kernels agree on: threads per block and the
// vector width. Included by both sides (host C++ and nvcc -cubin).
#pragma once

#include "axpy_cubin/config.h"

#define AXPY_THREADS 256
#define AXPY_VECTOR_BYTES 16
