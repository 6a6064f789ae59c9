"""What does it cost, per call, to order the parent's stream after a worker's
kernel on the device instead of on the host?

An isolated CUDA call is synchronous: the parent waits on the host until the
worker's kernel has ended, so back-to-back calls leave the GPU idle between
kernels for a round trip (~40 us a call at 2^28 on the H200). An asynchronous
call would return once the worker has enqueued its kernel, the parent's
stream made to wait on a flag the worker's stream writes after it
(flag_wait_probe.py: the parent can always release that wait itself). What
that wait costs is the question: without MPS the GPU time-slices between two
processes' contexts, and a context whose stream is blocked on a wait may
hold a slice while the other's kernel runs.

Two processes and one shared page: the parent asks for call k (a word the
worker spins on), the worker launches out = x + 2 y (torch.add, out=) on
its stream and says so (another word). Modes, per call:

  normal   the kernel in the parent's process (the anchor)
  sync     the worker polls its stream until the kernel ended, then says so;
           the parent first polls its own stream idle (today's isolated call)
  async    the worker says so once the kernel is enqueued, its stream then
           writes k to the flag; the parent polls its own stream idle, posts,
           and after the reply enqueues cuStreamWaitValue32(flag >= k)
  nowait   as async without the parent's stream wait or poll (unsafe;
           the pipelining bound)
  sync+ipc         sync, the kernel on the parent's tensors (CUDA IPC), as an
                   isolated worker's
  sync+ipc+guards  and a 64-byte canary after the output, copied in before
                   the kernel and out after it, as the worker guards an output
  chain    ordered on the device both ways, no host wait: the parent's stream
           writes k to a second flag and the worker's stream waits for it
           before the kernel; the worker says so once enqueued; the parent's
           stream waits on the worker's flag (what an asynchronous isolated
           call would do)

Per call: a round of CALLS calls, synchronized at its end, median over rounds.

    python3 bench/gpu/async_order_probe.py [--sizes 1 268435456] [--rounds 15] [--calls 40]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import multiprocessing as mp
import os
import statistics
import time

from flag_wait_probe import mapped_flag  # this folder

FLAG, REQUEST, LAUNCHED, MODE, SIZE, PROGRESS = 0, 64, 128, 192, 256, 320  # byte offsets of the shared words
# A mode's word for the worker: the low two bits how its end is told (1: the
# worker polls its stream, then says so; 2: says so once enqueued, its stream
# writes the flag after the kernel; 3: the same, the parent not waiting), then
# IPC (the kernel on the parent's tensors), GUARDS (the canary copied in and
# out) and CHAIN (the worker's stream first waits on the parent's flag).
MODES = {"sync": 1, "async": 2, "nowait": 3, "sync+ipc": 5, "sync+ipc+guards": 13, "chain": 18}
IPC, GUARDS, CHAIN = 4, 8, 16
STOP = 0xFFFFFFFF
CU_STREAM_WAIT_VALUE_GEQ = 0


def word(page, offset: int):
    return ctypes.c_uint32.from_buffer(page, offset)


def tensors(n: int):
    import torch

    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    return x, y, torch.empty(n, device="cuda")


def worker(parent_fd: str, conn) -> None:
    import torch
    import torch.multiprocessing  # noqa: F401  CUDA tensors received by IPC

    torch.ones(1, device="cuda")
    page, flag, cu = mapped_flag(os.open(parent_fd, os.O_RDWR))
    request, launched, mode_word, size_word = (word(page, o) for o in (REQUEST, LAUNCHED, MODE, SIZE))
    stream = torch.cuda.current_stream()
    handle = ctypes.c_void_p(stream.cuda_stream)
    write, stream_wait = cu["cuStreamWriteValue32"], cu["cuStreamWaitValue32"]
    driver = ctypes.CDLL("libcuda.so.1")
    to_device, to_host = driver.cuMemcpyHtoDAsync_v2, driver.cuMemcpyDtoHAsync_v2
    canary = torch.full((16,), 7, dtype=torch.int32).pin_memory()
    seen_zone = torch.empty(16, dtype=torch.int32).pin_memory()
    seen, n, data, shared = 0, 0, None, None
    while True:
        k = request.value
        if k == seen:
            continue
        seen = k
        if k == STOP:
            launched.value = k
            break
        if size_word.value != n:
            n = size_word.value
            data = None
            torch.cuda.synchronize()
            data = tensors(n)
            shared = conn.recv()  # the parent's x, y, out (out with 16 floats more: the zone)
        mode = mode_word.value
        if mode & IPC:
            x, y, padded = shared
            out = padded[:n]
        else:
            x, y, out = data
        if mode & CHAIN:  # after what the parent's stream holds before its call
            assert stream_wait(handle, ctypes.c_uint64(flag + PROGRESS), ctypes.c_uint32(k),
                               CU_STREAM_WAIT_VALUE_GEQ) == 0
        if mode & GUARDS:
            zone = padded.data_ptr() + 4 * n
            assert to_device(ctypes.c_uint64(zone), ctypes.c_void_p(canary.data_ptr()), ctypes.c_size_t(64),
                             handle) == 0
        torch.add(x, y, alpha=2.0, out=out)
        if mode & GUARDS:
            assert to_host(ctypes.c_void_p(seen_zone.data_ptr()), ctypes.c_uint64(zone), ctypes.c_size_t(64),
                           handle) == 0
        if mode & 3 == 1:  # sync
            while not stream.query():
                pass
        else:
            assert write(handle, ctypes.c_uint64(flag), ctypes.c_uint32(k), 0) == 0
        launched.value = k
    os._exit(0)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 1 << 28])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=40)
    options = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}", flush=True)
    torch.ones(1, device="cuda")  # a context current: the page is registered with it
    fd = os.memfd_create("kreg-async-order-probe")
    os.ftruncate(fd, mmap.PAGESIZE)
    page, flag, cu = mapped_flag(fd)
    request, launched, mode_word, size_word, flag_word = (word(page, o) for o in (REQUEST, LAUNCHED, MODE, SIZE,
                                                                                  FLAG))
    import torch.multiprocessing  # noqa: F401  CUDA tensors sent by IPC

    here, there = mp.get_context("spawn").Pipe()
    process = mp.get_context("spawn").Process(target=worker, args=(f"/proc/{os.getpid()}/fd/{fd}", there))
    process.start()
    stream = torch.cuda.current_stream()
    handle = ctypes.c_void_p(stream.cuda_stream)
    wait, write = cu["cuStreamWaitValue32"], cu["cuStreamWriteValue32"]
    k = 0

    def wait_for_worker(k: int) -> None:
        spins = 0
        while launched.value != k:
            spins += 1
            if spins % 100_000 == 0 and not process.is_alive():
                raise SystemExit(f"the worker died (exit code {process.exitcode}); its traceback is above")

    def call(mode: str) -> None:
        nonlocal k
        k += 1
        if mode == "chain":
            assert write(handle, ctypes.c_uint64(flag + PROGRESS), ctypes.c_uint32(k), 0) == 0
        elif "nowait" not in mode:
            while not stream.query():
                pass
        request.value = k
        wait_for_worker(k)
        if mode in ("async", "chain"):
            assert wait(handle, ctypes.c_uint64(flag), ctypes.c_uint32(k), CU_STREAM_WAIT_VALUE_GEQ) == 0

    for n in options.sizes:
        mode_word.value = MODES["sync"]
        size_word.value = n
        x, y, out = tensors(n)
        padded = torch.empty(n + 16, device="cuda")
        shared = (x, y, padded)
        k += 1
        request.value = k  # the worker allocates its tensors and takes the parent's
        here.send(shared)
        wait_for_worker(k)
        times = {mode: [] for mode in ("normal", *MODES)}
        for round_ in range(options.rounds + 2):  # two warm-up rounds
            for mode in times:
                if mode != "normal":
                    mode_word.value = MODES[mode]
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(options.calls):
                    if mode == "normal":
                        torch.add(x, y, alpha=2.0, out=out)
                    else:
                        call(mode)
                if mode == "nowait":  # the worker's stream writes the flag after its last kernel
                    while flag_word.value != k:
                        if not process.is_alive():
                            raise SystemExit("the worker died; its traceback is above")
                torch.cuda.synchronize()
                if round_ >= 2:
                    times[mode].append((time.perf_counter() - t0) / options.calls * 1e6)
        base = statistics.median(times["normal"])
        for mode, values in times.items():
            median = statistics.median(values)
            print(json.dumps(dict(n=n, mode=mode, us_per_call=round(median, 2), extra_us=round(median - base, 2),
                                  extra_pct=round(100 * (median - base) / base, 2),
                                  spread=[round(min(values), 2), round(max(values), 2)])), flush=True)
    request.value = STOP
    process.join(10)
    os._exit(0)


if __name__ == "__main__":
    main()
