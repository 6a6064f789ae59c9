/* The launch API of host launchers whose device code is a cubin compiled by
 * NVRTC or nvcc -cubin ([cuda] compiler = "nvrtc" / "nvcc-cubin"). The launcher is ordinary C++ built by the host
 * compiler with no CUDA or torch header (or by nvcc, with CUDA headers, where
 * [cuda] launcher_compiler = "nvcc"): it computes grids from sizes,
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
 * NULL is the legacy default stream). NULL on success, else a message naming
 * the kernel, valid until the next launch on this thread.
 *
 * shared_bytes is the kernel's dynamic shared memory, of any size the device
 * allows (up to 227 KB a block on an H100/H200, less the kernel's static
 * shared memory): beyond the driver's default limit of 48 KB the kernel's
 * limit is raised first (cuFuncSetAttribute,
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), once per kernel and
 * device, and again only for a larger size. */
const char* kreg_launch(const char* kernel, kreg_dim3 grid, kreg_dim3 block, unsigned shared_bytes,
                        void* stream, void** args);

/* kreg_launch with thread block clusters (sm_90 and later): `cluster` is the
 * cluster's size in blocks, each grid dimension a multiple of it; {1, 1, 1}
 * or {0, 0, 0} launch without one. Launched by cuLaunchKernelEx with
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; a cluster of more than 8 blocks (the
 * portable size; up to 16 on an H100/H200) first allows the kernel a
 * non-portable size (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED),
 * once per kernel and device. A kernel declared with __cluster_dims__ has its
 * cluster already and launches with kreg_launch. */
const char* kreg_launch_cluster(const char* kernel, kreg_dim3 grid, kreg_dim3 block, kreg_dim3 cluster,
                                unsigned shared_bytes, void* stream, void** args);

#ifdef __cplusplus
}
#endif

#endif /* KREG_LAUNCH_H_ */
