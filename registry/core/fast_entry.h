// The JIT binding's fast entry for the Op handle (registry/op.py).
//
// Called from Python through torch.ops, the binding's op goes the boxed way:
// every argument converted by the schema into an IValue, the dispatcher's
// boxed autograd fallback, then the kernel unboxed again. On an H200 that is
// ~1 us of a 1-element softmax's ~6.5 us per call, where torch.softmax, with
// its generated Python binding, calls its kernel directly.
//
// The shared binding (codegen.h) therefore also exports
//   extern "C" int kreg_init(PyObject* config);
//   extern "C" PyObject* kreg_fast_entry(int64_t table);
// kreg_init takes what the binding needs of Python (registry/load.py);
// kreg_fast_entry returns a Python function bound to that launcher table,
// taking the op's arguments (all of them, in order, read by the table's
// argument kinds) and calling the op directly, or None for a signature it
// does not convert (int[], ScalarType?, an optional Tensor(a!): those always
// take the dispatcher), or where torch has no DLPack exchange API.
//
// On torch's stable ABI (stable_binding_text.h) there is no C call from a
// Python tensor to torch's tensor before torch 2.14, so tensors are read
// through torch.Tensor.__dlpack_c_exchange_api__ (DLPack's C exchange API:
// data, sizes, strides, dtype, device, no allocation). Outputs go back as the
// very tensors allocated through torch 2.14's torch_tensor_to_pyobject (a weak
// reference: absent before 2.14), else through DLPack, whose Python tensor
// wraps the memory (not resizable; record_stream does nothing on it); there a
// CUDA output is raw memory of torch's caching allocator, which costs half of
// aoti_torch_empty_strided's trip through the dispatcher. The profiler's
// record is made only while torch.autograd profiles, and the device guard only
// off the current device (each ~1 us on an H200 through the shims:
// bench/stable_shim_costs.py).
//
// What the ATen entry read from c10's thread state is asked of Python (torch
// function and dispatch modes, deterministic fill), and a Tensor(a!)
// argument's version is bumped through torch._C._increment_version, as the
// dispatcher's ADInplaceOrView fallback does; those that are plain C builtins
// are called through their C function (PythonFunction, codegen.cc). What each
// costs: bench/results/percall-stable-cpu-2026-12-04/.
//
// The function returns NotImplemented, and the handle then
// takes the dispatcher, unless every Tensor is exactly torch.Tensor (no
// subclass: fake tensors and __torch_function__ see the dispatcher's op),
// strided memory DLPack describes (meta, sparse and functorch wrappers are
// refused by torch) of a dtype of the table, on the CPU or a CUDA device, not
// needing grad while grad mode is on; every number a Python float, int or
// bool; and no torch function or dispatch mode is active.
#pragma once

#include <string>

namespace kreg {

// The fast entry's C++ text (after the generic op in the shared binding).
std::string fast_entry();

}  // namespace kreg
