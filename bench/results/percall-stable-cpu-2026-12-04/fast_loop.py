"""The fast entry of one library kernel's op at n = 1, called N times in a
loop (grad mode on, as a notebook has it); prints microseconds a call.

    taskset -c 1 python fast_loop.py {scale,softmax,layernorm,axpy} [N]"""
import sys
import time

import torch

import registry

torch.set_num_threads(1)
name = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
args = {
    "scale": lambda: (torch.randn(1), -1.0),
    "softmax": lambda: (torch.randn(1, 1), 1.0),
    "layernorm": lambda: (torch.randn(1, 1), torch.randn(1), torch.randn(1), 1e-5),
    "axpy": lambda: (torch.randn(1), torch.randn(1), 1.5),
}[name]()
fast = registry.get(name)._fast
for _ in range(1000):
    fast(*args)
start = time.perf_counter()
for _ in range(n):
    fast(*args)
print(f"{(time.perf_counter() - start) / n * 1e6:.4f} us")
