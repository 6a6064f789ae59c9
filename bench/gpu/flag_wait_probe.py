"""The other way for a parent's stream to wait on an isolated worker's kernel:
a 32-bit flag in host memory both processes map (a memfd, registered with
the driver by each), that the worker's stream writes after its kernel
(cuStreamWriteValue32) and the parent's stream waits on
(cuStreamWaitValue32, >=). Unlike an interprocess event
(ipc_event_probe.py: the wait never ends once the worker dies or its context
is poisoned), the parent can always end the wait itself: it writes the flag
from the host when it finds the worker dead or failed.

  ok          the worker sleeps on the device ~0.5 s, then its stream writes the flag
  killed      the worker SIGKILLed mid-kernel; the parent, seeing it gone, writes the flag
  trap_alive  a device-side assert poisons the worker's context (its write never
              runs); the parent, told so, writes the flag

    python3 bench/gpu/flag_wait_probe.py     (needs a GPU; ~1 min)
"""
from __future__ import annotations

import ctypes
import json
import mmap
import multiprocessing as mp
import os
import time

from ipc_event_probe import WAIT_LIMIT_S, end_as_the_case_says, enqueue_kernels  # this folder

CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_DEVICEMAP = 1, 2
CU_STREAM_WAIT_VALUE_GEQ = 0
_registered: list = []


def driver():
    cuda = ctypes.CDLL("libcuda.so.1")

    def entry(name: str):
        for symbol in (name + "_v2", name):
            if hasattr(cuda, symbol):
                return getattr(cuda, symbol)
        raise SystemExit(f"libcuda has no {name}")

    return {name: entry(name) for name in ("cuMemHostRegister", "cuMemHostGetDevicePointer",
                                           "cuStreamWaitValue32", "cuStreamWriteValue32")}


def mapped_flag(fd: int):
    """The memfd's first page, mapped here and registered with this process's
    context: (the mapping, the flag's device address)."""
    cu = driver()
    page = mmap.mmap(fd, mmap.PAGESIZE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    assert cu["cuMemHostRegister"](ctypes.c_void_p(address), ctypes.c_size_t(mmap.PAGESIZE),
                                   CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP) == 0
    _registered.append(page)  # kept: a new mapping must not reuse a registered range's address
    device = ctypes.c_uint64()
    assert cu["cuMemHostGetDevicePointer"](ctypes.byref(device), ctypes.c_void_p(address), 0) == 0
    return page, device.value, cu


def worker(conn, parent_fd: str, case: str) -> None:
    import torch

    torch.ones(1, device="cuda")
    page, flag, cu = mapped_flag(os.open(parent_fd, os.O_RDWR))  # the parent's memfd, through /proc
    stream = torch.cuda.current_stream().cuda_stream
    enqueue_kernels(case)
    assert cu["cuStreamWriteValue32"](ctypes.c_void_p(stream), ctypes.c_uint64(flag), ctypes.c_uint32(1), 0) == 0
    conn.send("enqueued")
    end_as_the_case_says(conn, case)
    conn.recv()
    os._exit(0)


def probe(case: str) -> dict:
    import torch

    fd = os.memfd_create("kreg-flag-probe")
    os.ftruncate(fd, mmap.PAGESIZE)
    page, flag, cu = mapped_flag(fd)
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    process = ctx.Process(target=worker, args=(there, f"/proc/{os.getpid()}/fd/{fd}", case))
    process.start()
    assert here.recv() == "enqueued"
    stream = torch.cuda.Stream()
    t0 = time.perf_counter()
    assert cu["cuStreamWaitValue32"](ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(flag), ctypes.c_uint32(1),
                                     CU_STREAM_WAIT_VALUE_GEQ) == 0
    with torch.cuda.stream(stream):
        after = torch.ones(1, device="cuda") * 2
    ended, released_by_parent, said = None, None, None
    while time.perf_counter() - t0 < WAIT_LIMIT_S:
        if stream.query():
            ended = time.perf_counter() - t0
            break
        if said is None and here.poll():
            try:
                said = here.recv()
            except (EOFError, OSError):
                said = "worker: (gone)"
        gone = not process.is_alive()
        failed = said is not None and "error" in said
        if released_by_parent is None and (gone or failed):
            ctypes.c_uint32.from_buffer(page).value = 1  # the parent ends the wait itself
            released_by_parent = time.perf_counter() - t0
        time.sleep(0.002)
    try:
        here.send("done")
    except OSError:
        pass
    process.join(5.0)
    with torch.cuda.stream(stream):
        value = float(after.item()) if ended is not None else None
    return dict(case=case, wait_ended_s=ended, released_by_parent_at_s=released_by_parent, after_wait_value=value,
                worker=said, worker_exit=process.exitcode)


def main() -> None:
    import torch

    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}", flush=True)
    torch.ones(1, device="cuda")
    for case in ("ok", "killed", "trap_alive"):
        print(json.dumps(probe(case)), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
