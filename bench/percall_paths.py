"""Per-call host time at n = 1 on a GPU: which part of the op's call path
costs what (the handle, the binding through torch.ops, its builtin without
OpOverload's Python frame, torch's own op, an allocation alone; then the
same with the binding's Autograd key a fallthrough). Min and median of 15
rounds of 2000 back-to-back calls, interleaved.

    python3 bench/percall_paths.py
"""
import statistics, time, sys
import torch
import registry

def bench(fns, calls=2000, rounds=15):
    times = {k: [] for k in fns}
    for fn in fns.values():
        for _ in range(100): fn()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for k, fn in fns.items():
            s = time.perf_counter()
            for _ in range(calls): fn()
            torch.cuda.synchronize()
            times[k].append((time.perf_counter() - s) / calls * 1e6)
    for k, t in times.items():
        print(f"{k:40s} min {min(t):7.3f} us  median {statistics.median(t):7.3f} us", flush=True)

for dtype in (torch.float32, torch.bfloat16):
    op = registry.get("softmax", device="cuda")
    x = torch.randn(1, 1, device="cuda").to(dtype)
    fn, a = op._fn, op._address
    print(f"softmax {dtype} x[1, 1]")
    bench({"op(x, 1.0)": lambda: op(x, 1.0), "binding OpOverload": lambda: fn(x, 1.0, a),
           "binding builtin _op": lambda: fn._op(x, 1.0, a), "torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
           "torch.empty_like(x)": lambda: torch.empty_like(x)})
rowmax = registry.get("rowmax", device="cuda")
x = torch.randn(1, 1, device="cuda")
print("rowmax float32 x[1, 1]")
bench({"op(x)": lambda: rowmax(x), "binding OpOverload": lambda: rowmax._fn(x, rowmax._address),
       "torch.max(x, -1)": lambda: torch.max(x, -1)})
op = registry.get("softmax", device="cuda")
ns = str(op._fn).split(".")[0]
lib = torch.library.Library(ns, "IMPL")
lib.impl("call", torch.library.fallthrough_kernel, "Autograd")
x = torch.randn(1, 1, device="cuda")
print("softmax float32 with the binding's Autograd key a fallthrough")
bench({"op(x, 1.0)": lambda: op(x, 1.0), "binding OpOverload": lambda: op._fn(x, 1.0, op._address),
       "binding builtin _op": lambda: op._fn._op(x, 1.0, op._address), "torch.softmax(x, -1)": lambda: torch.softmax(x, -1)})
