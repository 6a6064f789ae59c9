// Tuning and the test hook: AXPY_BIAS is 0 in the shipped kernel (tests edit
// it to prove a header edit reaches the result).
#pragma once

#define AXPY_BIAS 0.0f
#define AXPY_VECTORS_PER_THREAD 4
