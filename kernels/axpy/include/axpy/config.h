// Tunables, found through the manifest's include_dirs.
#pragma once

// Added to every element; 0 for a true axpy. (The registry's tests edit this
// line in a copy of the kernel to prove header edits reach the running op.)
#define AXPY_BIAS 0.0f

// 16-byte vectors per thread per iteration of the CUDA kernel.
#define AXPY_VECTORS_PER_THREAD 4
