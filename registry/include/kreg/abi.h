/* The contract between a kernel library and the registry's generated binding.
 *
 * A kernel library includes no torch header. For each op and dtype it exports
 * one launcher, named <launcher>_<suffix> (suffix: f32, f16, bf16, f64):
 *
 *   KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y,
 *                                 float alpha, void* stream);
 *
 * Arguments follow the op signature: the output first, then every argument in
 * signature order (Tensor -> kreg_tensor, float -> float, int -> int64_t,
 * bool -> bool), then the stream: the current CUDA stream of the inputs'
 * device (a cudaStream_t), or NULL for CPU launchers. Tensors arrive
 * contiguous, on one device, with one dtype; the output has the shape of the
 * first Tensor argument. Data pointers may be misaligned for vector loads (a
 * view at an odd offset is a valid input).
 *
 * Return NULL on success or a static error string (e.g. cudaGetErrorString's
 * result); the binding raises it as a RuntimeError naming the op.
 */
#ifndef KREG_ABI_H_
#define KREG_ABI_H_

#include <stdint.h>

#define KREG_ABI_VERSION 1

typedef struct kreg_tensor {
  void* data;
  int64_t numel;
  int64_t ndim;
  const int64_t* sizes;
  const int64_t* strides;
} kreg_tensor;

/* Kernel libraries are built with hidden visibility; only launchers are
 * exported, so two versions of one kernel loaded in a process never interpose
 * each other's internal symbols. */
#ifdef __cplusplus
#define KREG_API extern "C" __attribute__((visibility("default")))
#else
#define KREG_API __attribute__((visibility("default")))
#endif

#endif /* KREG_ABI_H_ */
