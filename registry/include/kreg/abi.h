/* The contract between a kernel library and the registry's generated binding.
 *
 * A kernel library includes no torch header. For each op and dtype it exports
 * one launcher, named <launcher>_<suffix> (suffix from the dtype table,
 * registry/core/dtype.h: f32, f16, bf16, f64, i8, i16, i32, i64, u8, b8,
 * f8e4m3, f8e5m2):
 *
 *   KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y,
 *                                 float alpha, void* stream);
 *
 * Parameters follow the op signature: each return first (kreg_tensor, already
 * allocated from the manifest's `outputs` declaration), then every argument in
 * signature order, then the stream:
 *   Tensor, Tensor(a!)  kreg_tensor (a Tensor(a!) is written in place)
 *   Tensor?             kreg_tensor; data == NULL and ndim == -1 for None
 *   int -> int64_t, bool -> bool
 *   float               float, but double in a float64 launcher (suffix f64):
 *                       the scalar keeps the precision of the data it scales,
 *                       so a float64 op computes with the value the caller
 *                       gave (0.1 as float is off by 1.5e-9, outside what a
 *                       float64 result is checked to). The binding passes
 *                       Python's double as it is to a float64 launcher and
 *                       narrows it once for every other dtype:
 *     KREG_API const char* axpy_f64(kreg_tensor out, kreg_tensor x, kreg_tensor y,
 *                                   double alpha, void* stream);
 *   int[]               kreg_int_list
 *   ScalarType?         int32_t: a KREG_DTYPE_* code, or -1 for None
 *   stream              the current CUDA stream of the inputs' device (a
 *                       cudaStream_t), or NULL for CPU launchers.
 * The registry generates these prototypes from the signature and
 * force-includes them into every source of the kernel, so a launcher that
 * disagrees is a compile error (registry/core/launcher_header.h).
 * Tensors arrive contiguous and on one device; each has the dtype the op was
 * dispatched on unless the manifest fixes it (`arg_dtypes`). Data pointers may
 * be misaligned for vector loads (a view at an odd offset is a valid input).
 *
 * Return NULL on success or a static error string (e.g. cudaGetErrorString's
 * result); the binding raises it as a RuntimeError that starts with
 * "<kernel>.<op>: ", so the string says only what is wrong
 * ("rows of length 0 have no maximum").
 */
#ifndef KREG_ABI_H_
#define KREG_ABI_H_

#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

/* No version number to check: every kernel library's key and every binding's
 * key cover this file's content, so any change here rebuilds both sides. */

typedef struct kreg_tensor {
  void* data;
  int64_t numel;
  int64_t ndim;
  const int64_t* sizes;
  const int64_t* strides;
} kreg_tensor;

typedef struct kreg_int_list {
  const int64_t* data;
  int64_t size;
} kreg_int_list;

/* One parameter of a launcher, as the registry's shared binding hands it to
 * an op's entry (below): which member is set follows the signature.
 *   return, Tensor, Tensor?   tensor
 *   float                     f64 (the entry narrows it for all but float64 launchers)
 *   int / bool                i64 / b
 *   int[]                     list
 *   ScalarType?               dtype */
typedef union kreg_value {
  kreg_tensor tensor;
  double f64;
  int64_t i64;
  bool b;
  kreg_int_list list;
  int32_t dtype;
} kreg_value;

/* The entry of an op, generated from its signature into the kernel library
 * (core/launcher_header.h): calls `launcher` (one of the op's launchers)
 * with values[0..) spread into its typed parameters; wide != 0 for a float64
 * launcher. One compiled binding calls every op of every signature through
 * this one prototype, while the launchers keep their typed prototypes.
 *   KREG_API const char* kreg_entry__axpy(const void* launcher,
 *       const kreg_value* values, void* stream, int32_t wide); */
typedef const char* (*kreg_entry_fn)(const void* launcher, const kreg_value* values, void* stream, int32_t wide);

/* Codes of a ScalarType? argument: the dtype table's order (core/dtype.h). */
#define KREG_DTYPE_FLOAT32 0
#define KREG_DTYPE_FLOAT16 1
#define KREG_DTYPE_BFLOAT16 2
#define KREG_DTYPE_FLOAT64 3
#define KREG_DTYPE_INT8 4
#define KREG_DTYPE_INT16 5
#define KREG_DTYPE_INT32 6
#define KREG_DTYPE_INT64 7
#define KREG_DTYPE_UINT8 8
#define KREG_DTYPE_BOOL 9
#define KREG_DTYPE_FLOAT8_E4M3FN 10
#define KREG_DTYPE_FLOAT8_E5M2 11

/* Kernel libraries are built with hidden visibility; only launchers are
 * exported, so two versions of one kernel loaded in a process never interpose
 * each other's internal symbols. */
#ifdef __cplusplus
#define KREG_API extern "C" __attribute__((visibility("default")))
#else
#define KREG_API __attribute__((visibility("default")))
#endif

#endif /* KREG_ABI_H_ */
