"""Isolated ops: a kernel's launcher runs in a worker process, so a faulty
kernel raises registry.KernelFault instead of killing the notebook.

    op = registry.get("axpy", isolate=True)     # or REGISTRY_ISOLATE=1, %registry isolate on
    op(x, y, 2.0)                                 # same results as the normal op
    op.call(x, y, 2.0, timeout=5)                 # a per-call timeout
    registry.get("axpy", checked=True)            # sanitizers: faults named at file:line

How it fits together (each module's docstring has the details):

  handle.py      IsolatedOp: an Op on the SAME binding with a proxy launcher
                 table; turns a recorded fault into KernelFault
  proxy.py       the proxy table: a byte copy of the op's table whose launchers
                 are ctypes callbacks of the launcher's exact prototype; they
                 translate data pointers and forward the call to the worker
  supervisor.py  the workers: started on the first isolated call (not on
                 import), reused, replaced after a fault, a timeout or Ctrl-C
  launch_env.py  how a worker is started: python -E -s -S worker.py FD (no
                 torch, no registry import), libasan preloaded for checked CPU
                 builds, compute-sanitizer for checked CUDA builds
  worker.py      the worker: dlopens the kernel library (binds a cubin as
                 device_module does), maps shared memory, calls launchers
  wire.py        the messages between the two (versioned)
                 (a plain CPU worker's calls: a shared-memory call channel,
                 core/call_ring.h, written and read by C++ on both sides:
                 core/isolated_call.h in the op's table, core/ring_worker.h in
                 the worker; Python only for what is rare, see supervisor.py)
  guards.py      CPU canaries after each argument (and around staged ones),
                 checked after the call: an overrun is a KernelFault naming it
  guard_pages.py the worker's regions between inaccessible pages, and its
                 SIGSEGV handler naming the argument a guard page borders
  cuda_memory.py CUDA pointers as IPC handles + offsets
  checked.py     checked builds: a variant of the kernel keyed apart
  sanitizer_report.py  ASan/UBSan/memcheck reports as KernelFault fields

Memory: CPU tensor arguments are moved into shared memory in place (torch's
fd-backed shared storage, once per storage) and the worker maps them; the
outputs the binding allocates, from 64 KiB up, come from the shared output
pool (core/shared_output_pool.h: memfd segments the worker maps once, reused
call after call), so the launcher writes them in place. What is left (small
outputs, a contiguous copy the binding made) is staged through a shared
buffer: read-only inputs copied in, outputs and Tensor(a!) copied back.
`registry.status(name)` says how many calls staged how many bytes. CUDA
tensors go by IPC (cuIpcGetMemHandle of the allocation's base, once per
allocation); the parent waits for its stream before the call and the
worker for its own before replying, so stream order holds and a fault is
the call's own. Both poll (a blocking wait woke ~100 us after the kernel).
Ordering on the device instead: the worker's stream waiting on an IPC event
cost ~270 us a call on an H200; the parent's stream waiting on a flag in
shared host memory costs nothing measurable, but pays only for a call that
returns before its kernel ends, which could report the kernel's fault only
at a later call (bench/results/gpu-2026-12-06-async-order/).
"""
from __future__ import annotations

# Only the exception: importing any module of this package starts nothing and
# imports no other (the workers, their supervisor and its exit hook come with
# the first isolated call, supervisor.py).
from registry.isolation.faults import KernelFault

__all__ = ["KernelFault"]
