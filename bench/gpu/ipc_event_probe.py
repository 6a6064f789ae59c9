"""Could an isolated CUDA call return once its kernel is enqueued, not ended?

Only if the parent's stream can wait on the worker's kernel on the device (an
interprocess event the worker records after the kernel, waited on by the
parent's stream) and that wait still ends when the worker's kernel never
does: a worker killed mid-kernel, or one whose context a trap poisoned.
This probe answers that on a real driver, case by case:

  ok          the worker sleeps on the device ~0.5 s, records the event and
              stays healthy: the parent's wait should end after the sleep
  killed      the same, the worker SIGKILLed while its kernel runs
  trap_exit   a device-side assert after the sleep (the context is poisoned,
              the record never runs); the worker sees the error and exits
  trap_alive  the same, the worker stays alive (poisoned) until the parent is done

For each: whether the parent's stream got past the wait within 10 s and when,
and whether the parent's GPU still works afterwards (a fresh stream).

    python3 bench/gpu/ipc_event_probe.py     (needs a GPU; ~1 min)
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time

SLEEP_CYCLES = 1_000_000_000  # torch.cuda._sleep: ~0.5 s at the H100/H200's ~2 GHz
WAIT_LIMIT_S = 10.0


def enqueue_kernels(case: str) -> None:
    """The worker's device work on its current stream: a ~0.5 s sleep, then
    for the trap cases an index out of range (a device-side assert)."""
    import torch

    torch.cuda._sleep(SLEEP_CYCLES)
    if case.startswith("trap"):
        table = torch.zeros(4, device="cuda")
        table[torch.tensor([9], device="cuda")] = 1.0


def end_as_the_case_says(conn, case: str) -> bool:
    """After the worker told the parent what to wait on: killed mid-kernel,
    or it waits for its stream and says how that went; True on an error."""
    import torch

    if case == "killed":
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        torch.cuda.synchronize()
        conn.send("worker: synchronized")
        return False
    except RuntimeError as error:
        conn.send("worker: " + str(error).splitlines()[0][:160])
        return True


def worker(conn, case: str) -> None:
    import torch

    event = torch.cuda.Event(interprocess=True)
    enqueue_kernels(case)
    event.record()
    conn.send(event.ipc_handle())
    if end_as_the_case_says(conn, case) and case == "trap_exit":
        os._exit(3)
    conn.recv()  # alive until the parent is done with this case
    os._exit(0)


def probe(case: str) -> dict:
    import torch

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    process = ctx.Process(target=worker, args=(there, case))
    process.start()
    handle = here.recv()
    event = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), handle)
    stream = torch.cuda.Stream()
    t0 = time.perf_counter()
    with torch.cuda.stream(stream):
        stream.wait_event(event)
        after = torch.ones(1, device="cuda") * 2
    ended = None
    while time.perf_counter() - t0 < WAIT_LIMIT_S:
        if stream.query():
            ended = time.perf_counter() - t0
            break
        time.sleep(0.005)
    try:
        said = here.recv() if here.poll(2.0) else "worker: (nothing)"
    except (EOFError, OSError):
        said = "worker: (gone)"
    try:
        here.send("done")
    except OSError:
        pass
    process.join(5.0)
    fresh = torch.cuda.Stream()
    with torch.cuda.stream(fresh):  # every read on this stream: the default one may wait on a stuck one
        check = torch.arange(3, device="cuda").sum()
        t1 = time.perf_counter()
        while not fresh.query() and time.perf_counter() - t1 < 5.0:
            time.sleep(0.005)
        healthy = fresh.query() and int(check.item()) == 3
    with torch.cuda.stream(stream):
        value = float(after.item()) if ended is not None else None
    return dict(case=case, wait_ended_s=ended, after_wait_value=value, worker=said,
                worker_exit=process.exitcode, parent_gpu_healthy_after=healthy)


def main() -> None:
    import torch

    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}", flush=True)
    torch.ones(1, device="cuda")
    for case in ("ok", "killed", "trap_exit", "trap_alive"):
        print(json.dumps(probe(case)), flush=True)
    os._exit(0)  # a stream still waiting must not hold the interpreter's exit


if __name__ == "__main__":
    main()
