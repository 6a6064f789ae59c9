/* The launcher table: how the registry's shared binding finds one kernel
 * version's code. Declared here once, for every side that reads or writes it:
 *   - the core fills it (registry/core/launcher_table.h, .cc);
 *   - the generated binding includes this file and reads it
 *     (registry/core/binding_text.cc, codegen.cc, codegen_aot.cc);
 *   - an isolated op copies it through ctypes (registry/isolation/proxy.py,
 *     whose Structures a test compares with the offsets _core reports).
 * C-compatible and torch-free for that reason.
 *
 * The binding's op takes the address of a table holding what the manifest
 * declares about the op (fixed argument dtypes, same-shape arguments, output
 * shapes) and the launcher addresses found in the kernel library. Swapping
 * the table an Op handle passes is how a new kernel version goes live
 * without touching the binding. The shared binding's key covers this file's
 * content (core/build_keys.cc), so a change here rebuilds the binding;
 * KREG_TABLE_MAGIC still changes with the layout, because a table crosses
 * from the core to a binding (and to proxy.py) as a bare address.
 *
 * Kernel libraries never see a table: their contract is kreg/abi.h. */
#ifndef KREG_LAUNCHER_TABLE_H_
#define KREG_LAUNCHER_TABLE_H_

#include <stdint.h>

/* "kregTBL5": 3 added the routes, 4 the output hooks, 5 the signature. */
#define KREG_TABLE_MAGIC 0x6b72656754424c35ULL

/* The fixed arrays' sizes. The manifest parser refuses an op beyond them
 * (core/table_limits.h), so no table can overflow. */
#define KREG_TABLE_MAX_ARGS 32        /* arguments of one op */
#define KREG_TABLE_MAX_OUTPUTS 8      /* returns of one op */
#define KREG_TABLE_MAX_OUTPUT_DIMS 8  /* terms of one output's shape */
#define KREG_TABLE_MAX_ROUTE_DIMS 8   /* dims of a tuned route's shape bucket */
/* One launcher slot per dtype of the dtype table (core/dtype.h; a test checks
 * the count), indexed by KREG_DTYPE_* code (kreg/abi.h). */
#define KREG_TABLE_DTYPE_SLOTS 12

/* One term of an output's shape (core/output_spec.h): a constant, one dim of
 * an argument, or a Python slice of an argument's dims. */
typedef struct kreg_launcher_dim_term {
  int32_t kind; /* 0 constant a, 1 args[arg].size(a), 2 args[arg].shape[a:b] */
  int32_t arg;
  int64_t a;
  int64_t b; /* INT64_MAX: to the end */
} kreg_launcher_dim_term;

typedef struct kreg_launcher_output_decl {
  int32_t dtype_code; /* a fixed dtype, or -1 */
  int32_t dtype_arg;  /* else the dtype of this argument */
  int32_t ndims;
  int32_t unused;
  kreg_launcher_dim_term dims[KREG_TABLE_MAX_OUTPUT_DIMS];
} kreg_launcher_output_decl;

/* A tuned route (core/tuned_table.h): calls whose dispatch dtype is
 * `dtype_slot` and whose first Tensor argument's shape falls in `bucket`
 * (every dim d with bucket/2 < d <= bucket, 0 for 0) run `launcher`, another
 * config's launcher of the same op. */
typedef struct kreg_launcher_route {
  int32_t dtype_slot;
  int32_t ndims;
  int64_t bucket[KREG_TABLE_MAX_ROUTE_DIMS];
  void* launcher;
} kreg_launcher_route;

typedef struct kreg_launcher_table {
  uint64_t magic;                                 /* KREG_TABLE_MAGIC */
  const char* op_name;                            /* "kernel.op", for error messages */
  const char* dtypes;                             /* what the manifest lists, for error messages */
  uint64_t same_shape_mask;                       /* bit i: argument i has the shape of the lowest such argument */
  int32_t arg_dtypes[KREG_TABLE_MAX_ARGS];        /* per argument: a fixed dtype code, or -1 (the dispatch dtype) */
  kreg_launcher_output_decl outputs[KREG_TABLE_MAX_OUTPUTS];
  void* launchers[KREG_TABLE_DTYPE_SLOTS];        /* by dtype code; null if not listed */
  int64_t route_count;                            /* registry.tune's winners: 0 unless tuned */
  const kreg_launcher_route* routes;              /* route_count of them, tried in order */
  /* An isolated CPU op's table (registry/isolation/proxy.py) sets these to the
   * shared output pool's (core/shared_output_pool.h): its outputs of 64 KiB
   * and more are memory its worker maps. Null in every other table. */
  void* (*shared_output_allocate)(int64_t nbytes);
  void (*shared_output_release)(void* pointer);
  /* The op's signature: one compiled binding serves every signature, so the
   * table says what the arguments are and the kernel library's entry
   * (kreg_entry_fn, kreg/abi.h) spreads them. */
  const void* entry;                              /* kreg_entry__<op>; null in AOT units */
  int32_t arg_count;
  int32_t return_count;
  int32_t first_tensor;                           /* the first Tensor argument that is not optional */
  /* An isolated CUDA op's table sets it (registry/isolation/proxy.py): each
   * output the binding allocates has this many bytes after its end in its own
   * storage, where the worker keeps canaries during a call. 0 elsewhere. */
  int32_t output_padding;
  uint64_t mutated_mask;                          /* bit i: argument i is a Tensor(a!) */
  char arg_kinds[KREG_TABLE_MAX_ARGS];            /* per argument: 'T' Tensor, 'O' Tensor?, 'f' float, 'i' int,
                                                     'b' bool, 'l' int[], 's' ScalarType? */
  const char* arg_names[KREG_TABLE_MAX_ARGS];
} kreg_launcher_table;

#endif /* KREG_LAUNCHER_TABLE_H_ */
