/* The launch API of host launchers whose device code is a cubin compiled by
 * NVRTC or nvcc -cubin ([cuda] compiler = "nvrtc" / "nvcc-cubin"). The launcher is ordinary C++ built by the host
 * compiler with no CUDA or torch header: it computes grids from sizes,
 * launches any number of kernels of the kernel's module by name, and returns
 * what kreg_launch returns (NULL or an error string), e.g.
 *
 *   void* args[] = {&x, &y, &out, &n, &alpha};
 *   return kreg_launch("axpy_scalar_f32", kreg_dim3{blocks, 1, 1}, kreg_dim3{256, 1, 1},
 *                      0, stream, args);
 *
 * Kernels are found by their symbol name in the cubin: declare them
 * extern "C" __global__ in the device source. args[i] points at the value of
 * the kernel's i-th parameter, of exactly the type the kernel declares.
 *
 * The registry binds the current module (and the driver's entry points) into
 * the loaded launcher library each time the device code is rebuilt, so a
 * device-code edit swaps kernels under the same launchers. */
#ifndef KREG_LAUNCH_H_
#define KREG_LAUNCH_H_

#include "kreg/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kreg_dim3 {
  unsigned x, y, z;
} kreg_dim3;

/* Launches `kernel` of the bound module on `stream` (a cudaStream_t / CUstream;
 * NULL is the legacy default stream). NULL on success, else a static message. */
const char* kreg_launch(const char* kernel, kreg_dim3 grid, kreg_dim3 block, unsigned shared_bytes,
                        void* stream, void** args);

#ifdef __cplusplus
}
#endif

#endif /* KREG_LAUNCH_H_ */
