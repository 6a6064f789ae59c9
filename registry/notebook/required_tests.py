"""The bodies of a lab's required tests (registry.testing.lab_tests): one op,
dtype and size checked against the reference, and the op's time against its
own launcher's.

Numerics follow registry.sweep's contract (checks.py): the same inputs, seed
(the size), poisoning, reference call and tolerances, so a test and a sweep
agree on what passes.

Overhead: the anchor is the op's launcher for that dtype, called through
ctypes with the op's inputs and an output allocated once, so both sides run
the same kernel on the same data; the difference is the wrapper (argument
checks, output allocation, dispatch, stream lookup). It is checked to give
the op's result before it is timed. Rounds of `calls` back-to-back calls
alternate between the two (CUDA events on CUDA, perf_counter on the CPU) and
the medians are compared, so load that comes and goes hits both alike.
"""
from __future__ import annotations

import ctypes
import statistics
import time
from dataclasses import dataclass

import torch

from registry import dtypes as dtype_table
from registry.notebook import checks


def _op_and_spec(kernel: str, op_name: str, device: str):
    import registry
    from registry.resolve import find

    manifest = find(kernel)
    spec = next(s for s in manifest.ops if s.name == op_name)
    handle = registry.get(kernel, device=device)
    return (handle.ops[op_name] if hasattr(handle, "ops") else handle), spec, manifest


def _inputs(spec, dtype: str, n: int, device: str) -> list:
    generator = torch.Generator(device=device).manual_seed(n)
    return checks.make_args(spec, n, dtype_table.torch_dtype(dtype), device, generator, {})


def check_numerics(kernel: str, op_name: str, dtype: str, n: int, device: str) -> None:
    """Raises AssertionError saying which output is off, by how much, and with what tolerance."""
    op, spec, manifest = _op_and_spec(kernel, op_name, device)
    module = checks.load_reference(manifest)
    reference = getattr(module, spec.reference, None)
    assert reference is not None, (f"{kernel}.{op_name}: the reference module ({manifest.reference}) has no function "
                                   f"{spec.reference!r}; define it (float64, same arguments as the op)")
    args = _inputs(spec, dtype, n, device)
    shapes = " ".join(f"{a.name}{list(t.shape)}" for a, t in zip(spec.signature.args, args)
                      if isinstance(t, torch.Tensor))
    _poison(args, dtype, device)
    result = checks.check_call(op, spec, reference, args, module)
    rtol, atol = checks.tolerance(dtype, module, spec.name)
    assert result.passed, (f"{kernel}.{op_name} {dtype} n={n} ({shapes}) on {device}: {result.reason}; "
                           f"max abs error {result.max_abs_err:.3g}, max rel error {result.max_rel_err:.3g} "
                           f"(rtol {rtol:g}, atol {atol:g})")


def _poison(args: list, dtype: str, device: str) -> None:
    # As registry.sweep: a NaN block of the inputs' size freed right before the
    # call, so the allocator likely hands it to the output (elements the
    # kernel forgets to write stay NaN).
    elements = sum(t.numel() for t in args if isinstance(t, torch.Tensor))
    block = torch.full((max(1, elements),), float("nan"), dtype=dtype_table.torch_dtype(dtype), device=device)
    del block


@dataclass
class Overhead:
    op_ms: float
    launcher_ms: float
    rounds: int

    @property
    def overhead(self) -> float:
        return (self.op_ms - self.launcher_ms) / self.launcher_ms

    def __str__(self) -> str:
        return (f"wrapper overhead {self.overhead:+.2%} (op {self.op_ms:.4f} ms, its launcher alone "
                f"{self.launcher_ms:.4f} ms; medians of {self.rounds} interleaved rounds)")


def measure_overhead(kernel: str, op_name: str, dtype: str, n: int, device: str, rounds: int = 15,
                     calls: int = 10) -> Overhead:
    op, spec, _ = _op_and_spec(kernel, op_name, device)
    args = _inputs(spec, dtype, n, device)
    positional, keywords = checks.split_arguments(spec, args)
    outputs = checks.results(spec, args, op(*positional, **keywords)) if spec.signature.returns else []
    launch = _launcher_call(op, spec, dtype, device, outputs, args)
    expected = [o.clone() for o in outputs]
    for o in outputs:
        o.fill_(float("nan") if o.is_floating_point() else 0)
    launch()
    _sync(device)
    for got, want in zip(outputs, expected):  # the anchor runs the op's kernel, or the comparison means nothing
        same = checks.compare(got, want, *checks.tolerance(checks.dtype_name(want.dtype)))
        assert same.passed, f"{kernel}.{op_name}: its launcher called directly gave another result ({same.reason})"

    def run_op():
        op(*positional, **keywords)

    op_times, launcher_times = [], []
    for fn in (run_op, launch):  # warm-up
        for _ in range(3):
            fn()
    for _ in range(rounds):
        op_times.append(_time(run_op, calls, device))
        launcher_times.append(_time(launch, calls, device))
    return Overhead(statistics.median(op_times) * 1e3, statistics.median(launcher_times) * 1e3, rounds)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time(fn, calls: int, device: str) -> float:
    """Seconds per call over `calls` back-to-back calls."""
    if device == "cuda":
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3 / calls
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def _launcher_call(op, spec, dtype: str, device: str, outputs: list, args: list):
    """A function calling the op's launcher for `dtype` directly: outputs
    first, then the arguments in signature order, then the stream
    (registry/include/kreg/abi.h); raises when the launcher returns an error."""
    import pytest

    from registry.isolation import wire

    address = op._table.launcher(dtype) if op._table is not None else 0
    if not address:
        pytest.skip(f"{op.kernel}.{op.name}: no launcher to time against (a binding = \"pybind\" module's "
                    f"function has no launcher table); time it against your own kernel call instead")
    kinds = "T" * len(outputs) + "".join(wire.KIND_OF_TYPE[a.type_name] for a in spec.signature.args)
    if dtype == "float64":
        kinds = kinds.replace("f", "d")  # a float64 launcher takes float arguments as double
    prototype = ctypes.CFUNCTYPE(ctypes.c_char_p, *(wire.CTYPE_OF_KIND[k] for k in kinds), ctypes.c_void_p)
    launcher = prototype(address)
    keep = []  # the arrays the structs point into
    values = [_c_value(kind, value, keep) for kind, value in zip(kinds, list(outputs) + list(args))]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream if device == "cuda" else None)

    def launch():
        error = launcher(*values, stream)
        if error is not None:
            raise RuntimeError(f"{op.kernel}.{op.name}: its launcher says: {error.decode(errors='replace')}")

    launch._keep = keep
    return launch


def _c_value(kind: str, value, keep: list):
    from registry.isolation import wire

    if kind == "T":
        if value is None:
            return wire.KregTensor(None, 0, -1, None, None)
        sizes = (ctypes.c_int64 * value.dim())(*value.shape)
        strides = (ctypes.c_int64 * value.dim())(*value.stride())
        keep += [sizes, strides, value]
        return wire.KregTensor(value.data_ptr(), value.numel(), value.dim(), sizes, strides)
    if kind == "l":
        data = (ctypes.c_int64 * len(value))(*value)
        keep.append(data)
        return wire.KregIntList(data, len(value))
    if kind == "s":
        return ctypes.c_int32(-1 if value is None else dtype_table.NAMES.index(checks.dtype_name(value)))
    return wire.CTYPE_OF_KIND[kind](value)
