// The JIT binding's fast entry for the Op handle (registry/op.py).
//
// Called from Python through torch.ops, the binding's op goes the boxed way:
// every argument converted by the schema into an IValue, the dispatcher's
// boxed autograd fallback, then the kernel unboxed again. On an H200 that is
// ~1 us of a 1-element softmax's ~6.5 us per call, where torch.softmax, with
// its generated Python binding, calls its kernel directly.
//
// The shared binding (codegen.h) therefore also exports
//   extern "C" PyObject* kreg_fast_entry(int64_t table);
// which returns a Python function bound to that launcher table, taking the
// op's arguments (all of them, in order, read by the table's argument kinds)
// and calling the op directly, or None for a signature it does not convert (int[],
// ScalarType?, an optional Tensor(a!): those always take the dispatcher).
// A Tensor(a!) argument has its version bumped after the call, as the
// dispatcher's ADInplaceOrView fallback does. The function
// returns NotImplemented, and the handle then takes the dispatcher, unless
// every Tensor is a plain torch.Tensor (exact type; strided; on the CPU or a
// CUDA device; no dispatch key beyond its device's, autograd's and
// autocast's; not needing grad while grad mode is on), every number a Python
// float, int or bool, and no torch function or dispatch mode (nor any other
// thread-local dispatch key) is active. Subclasses, fake, meta and functorch
// tensors, modes and tracing thus all see the dispatcher's op as before.
#pragma once

#include <string>


namespace kreg {

// The #include lines the fast entry needs; the binding's text starts with them.
std::string fast_entry_includes();

// The fast entry's C++ text (after the generic op in the shared binding).
std::string fast_entry();

}  // namespace kreg
