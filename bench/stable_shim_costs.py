"""What the stable ABI's C calls that a fast call makes cost, one by one, on
this machine's torch: each called through ctypes in a loop, less a ctypes call
that does next to nothing (torch's grad-mode query), so the figures are the calls'
own. Beside them, the Python-side costs the fast entry pays on a torch
without torch_tensor_to_pyobject (a DLPack import per output).

    python bench/stable_shim_costs.py [--device cuda] [--calls 20000] [--rounds 15]

Prints median microseconds per call; writes nothing.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time

import torch

P = ctypes.c_void_p
I64 = ctypes.c_int64


def median_us(call, calls: int, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
    libs = [ctypes.CDLL(os.path.join(libdir, n)) for n in ("libtorch_cpu.so", "libtorch_cuda.so")
            if os.path.exists(os.path.join(libdir, n))]

    def sym(name):
        for library in libs:
            try:
                return getattr(library, name)
            except AttributeError:
                continue
        return None

    cuda = args.device == "cuda"
    device_type = sym("aoti_torch_device_type_cuda")() if cuda else sym("aoti_torch_device_type_cpu")()
    f32 = sym("aoti_torch_dtype_float32")()
    rows = []
    grad = sym("aoti_torch_grad_mode_is_enabled")
    base = median_us(lambda: grad(), args.calls, args.rounds)
    rows.append(("ctypes call of a C function that does next to nothing (subtracted below)", base))
    size, stride, out = I64(1), I64(1), P()
    empty, delete = sym("aoti_torch_empty_strided"), sym("aoti_torch_delete_tensor_object")

    def empty_delete():
        empty(1, ctypes.byref(size), ctypes.byref(stride), f32, device_type, 0, ctypes.byref(out))
        delete(out)
    rows.append(("aoti_torch_empty_strided + delete (n = 1, float32)", median_us(empty_delete, args.calls, args.rounds) - 2 * base))
    raw_alloc, raw_delete = sym("aoti_torch_cuda_caching_allocator_raw_alloc"), sym("aoti_torch_cuda_caching_allocator_raw_delete")
    print("aoti_torch_cuda_caching_allocator_raw_alloc:", "present" if raw_alloc is not None else "absent")
    print("torch_tensor_to_pyobject:", "present" if sym("torch_tensor_to_pyobject") is not None else "absent")
    if cuda and raw_alloc is not None:
        ptr = P()

        def raw():
            raw_alloc(ctypes.c_uint64(4), ctypes.byref(ptr))
            raw_delete(ptr)
        rows.append(("caching allocator raw_alloc + raw_delete (4 bytes)", median_us(raw, args.calls, args.rounds) - 2 * base))
    start, end = sym("aoti_record_function_start"), sym("aoti_record_function_end")
    guard = P()

    def record():
        start(b"kreg_op", None, None, 0, ctypes.byref(guard))
        end(guard)
    rows.append(("aoti_record_function_start + end (no profiler)", median_us(record, args.calls, args.rounds) - 2 * base))
    if cuda:
        create, drop = sym("aoti_torch_create_device_guard"), sym("aoti_torch_delete_device_guard")

        def device_guard():
            create(0, ctypes.byref(guard))
            drop(guard)
        rows.append(("aoti_torch_create_device_guard + delete", median_us(device_guard, args.calls, args.rounds) - 2 * base))
        current, stream = sym("aoti_torch_get_current_cuda_stream"), P()
        rows.append(("aoti_torch_get_current_cuda_stream",
                     median_us(lambda: current(0, ctypes.byref(stream)), args.calls, args.rounds) - base))
    x = torch.ones(1, device=args.device)
    rows.append(("Python: torch.empty(1) on the device", median_us(lambda: torch.empty(1, device=args.device), args.calls, args.rounds)))
    rows.append(("Python: torch.from_dlpack(x) (a DLPack import: capsule out, tensor in)",
                 median_us(lambda: torch.from_dlpack(x), args.calls, args.rounds)))
    rows.append(("Python: x.detach() (a new tensor object of the same storage)", median_us(lambda: x.detach(), args.calls, args.rounds)))
    rows.append(("Python: torch.autograd.graph.increment_version(x)",
                 median_us(lambda: torch.autograd.graph.increment_version(x), args.calls, args.rounds)))
    print(f"torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if cuda else "") + f", median of {args.rounds} rounds of {args.calls} calls")
    for what, us in rows:
        print(f"{us:8.3f} us  {what}")


if __name__ == "__main__":
    main()
