"""What an in-place op's version bump costs per call: scale_ (Tensor(a!), no
output) at n = 1 on the CPU through the handle's fast entry, its argument's
version bumped through torch.autograd.graph.increment_version (A, the
binding's way before 4e77c0e) or torch._C._increment_version with a 1-tuple
(B, since), switched in one process by handing the loaded shared binding its
kreg_init tuple again; 40 interleaved rounds of 2000 calls, pinned to core 1.

    python bench/inplace_version_bump.py

Prints each side's median microseconds a call; writes nothing.
"""
import ctypes
import os
import statistics
import time

os.sched_setaffinity(0, {1})
import torch  # noqa: E402

import registry  # noqa: E402
from registry import load  # noqa: E402
from registry.state import STATE  # noqa: E402

op = registry.get("scale", device="cpu")
x = torch.randn(1)
binding = next(iter(STATE.bindings.values()))
init = ctypes.PyDLL(binding.path, mode=ctypes.RTLD_LOCAL).kreg_init
init.restype, init.argtypes = ctypes.c_int, [ctypes.py_object]

def hand(bump):
    """The binding's kreg_init tuple (load.binding_config) with `bump` for the version bump."""
    config = list(load.binding_config())
    config[6] = bump  # torch._C._increment_version's place
    assert init(tuple(config)) == 1


def per_call(calls=2000):
    t0 = time.perf_counter()
    for _ in range(calls):
        op(x, 1.0)
    return (time.perf_counter() - t0) / calls * 1e6

sides = {"A wrapper": torch.autograd.graph.increment_version, "B direct": torch._C._increment_version}
samples = {k: [] for k in sides}
for r in range(40):
    for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
        hand(sides[name])
        v = x._version
        per_call(200)
        samples[name].append(per_call())
        assert x._version == v + 2200
for name, s in samples.items():
    print(f"{name}: median {statistics.median(s):.3f} us a call (40 rounds of 2000)")
