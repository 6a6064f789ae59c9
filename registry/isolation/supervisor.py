"""The worker processes of this process: started on the first isolated call,
reused, replaced after a fault (see registry/isolation/__init__.py).

One worker per flavor and backend: "plain" runs launchers as they are,
"asan" is started with libasan preloaded (checked CPU builds), "memcheck"
under compute-sanitizer (checked CUDA builds). A worker holds what was sent
to it (loaded launchers, mapped memory); a new worker starts empty and gets
it again on its next call.

A plain worker's calls go through a call channel (core/call_ring.h; on CUDA
unless REGISTRY_ISOLATE_CUDA_CHANNEL=0) in
shared memory instead of the socket: the op's binding reaches it through
core/isolated_call.h without Python when everything the call needs is in
place, and through Worker.request otherwise. The socket carries the rest
(memory, launchers); the worker leaves its ring loop for it (_leave_ring).
"""
from __future__ import annotations

import atexit
import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from registry import knobs
from registry.isolation import wire
from registry.isolation.interrupts import WATCH

SPIN_READS = 100  # non-blocking reads before a blocking wait (~50 us)
# A CUDA call waits for a device kernel, which may run for milliseconds; a
# blocking wait would add a wake-up of this process (tens of microseconds with
# Python) to every call, a bubble on the GPU between back-to-back calls. Spin
# this long first, as the CUDA runtime's own default synchronization does.
CUDA_SPIN_SECONDS = 0.02
# A blocking wait polls in slices this long: SIGINT that came just before the
# poll (or to another thread) does not interrupt it, and is seen at the next
# slice; ten wake-ups a second cost nothing beside a call that blocks.
WAIT_SLICE_SECONDS = 0.1
# The call channel's waits: the parent spins this long for a reply, then
# sleeps on the channel's futex in slices this long, between which it checks
# the worker's liveness (the socket's hangup), the timeout and Ctrl-C.
RING_SPIN_NS = 50_000
RING_SLICE_SECONDS = 0.01
_HUNG_UP = object()  # ring_wait: the worker hung up without replying

SIGNAL_MEANING = {
    signal.SIGSEGV: "a segmentation fault: the kernel read or wrote memory the process does not own "
                    "(an index past the end of a tensor, a null or stale pointer)",
    signal.SIGBUS: "a bus error: a misaligned or unmapped access",
    signal.SIGFPE: "an arithmetic exception: an integer division by zero, or an overflowing division",
    signal.SIGABRT: "an abort: the kernel called abort(), an assertion failed, or an exception escaped the launcher",
    signal.SIGILL: "an illegal instruction: a trap (__builtin_trap), or code built for another CPU",
    signal.SIGKILL: "SIGKILL from outside (the system's out-of-memory killer, or a user)",
}


class WorkerDied(Exception):
    """The worker ended while a call was in flight. .what says how, readably."""

    def __init__(self, what: str, log: str = ""):
        super().__init__(what)
        self.what, self.log = what, log


class WorkerTimeout(Exception):
    pass


class Worker:
    """One running worker and what it holds."""

    def __init__(self, flavor: str, backend: str, ordinal: int, command: list[str], env: dict, log_path: Path):
        self.flavor, self.backend, self.log_path = flavor, backend, log_path
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = parent
        log = open(log_path, "wb")
        started = time.perf_counter()
        self.process = subprocess.Popen(command + [str(child.fileno())], pass_fds=(child.fileno(),), env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        child.close()
        self.start_seconds = time.perf_counter() - started
        self.launchers: dict[tuple, int] = {}  # (library, symbol, cubin, kinds) -> id
        # library -> the cubin the worker bound to it last: a launcher library
        # serves one image at a time, as in this process (driver_module.py).
        self.bound_cubins: dict[str, str] = {}
        self.cpu_regions: dict = {}  # storage base -> region (cpu_memory.py: CpuRegion)
        self.cuda_regions: dict[int, tuple[int, int]] = {}  # allocation base -> (buffer id, region id)
        self.cuda_pointers: dict[int, tuple[int, int, int]] = {}  # data pointer -> (buffer id, region id, offset)
        self._next_region = 1  # 0 is reserved for the staging buffer's first region
        self.staging = None  # (region id, mmap, address, size)
        self._staged_calls = self._staged_bytes = 0
        self.pool_regions = {}  # shared output pool segment id -> region id in this worker
        self._calls = 0
        self.channel = None
        self._log_read = 0
        self._poller = select.poll()
        # Replies are read into one buffer made here: a bytes object allocated
        # per read (failed non-blocking reads included) costs the spin.
        self._reply = bytearray(wire.MAX_MESSAGE)
        self._reply_view = memoryview(self._reply)
        self._poller.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.sock.send(wire.HELLO.pack(b"H", wire.VERSION, b"g" if backend == "cuda" else b"c", ordinal,
                                       flavor != "plain"))
        if flavor == "plain" and (backend == "cpu" or knobs.isolate_cuda_channel()):
            # Checked workers keep the socket: a sanitizer's report, not the call's speed, is their point.
            from registry import _core

            self.channel = _core.CallChannel()
            if backend == "cuda":
                from registry.isolation import cuda_memory

                self.channel.set_cuda_driver(*cuda_memory.driver_entries())
                # A reply comes when the kernel has ended: spin as long as a launch is polled
                # (a futex wake-up is a gap on the device between back-to-back calls).
                self.channel.spin_ns = int(CUDA_SPIN_SECONDS * 1e9)
            socket.send_fds(self.sock, [b"Q" + _core.__file__.encode()], [self.channel.fd])
            _core.add_call_channel(self.channel)

    # -- what the worker did (the channel's fast path counts its own calls) ----
    def _count(name):
        def get(self):
            return getattr(self, "_" + name) + (getattr(self.channel, name) if self.channel is not None else 0)

        def set_(self, value):
            setattr(self, "_" + name, value - (getattr(self.channel, name) if self.channel is not None else 0))

        return property(get, set_)

    calls, staged_calls, staged_bytes = _count("calls"), _count("staged_calls"), _count("staged_bytes")
    del _count

    def _send(self, message: bytes, fds=()) -> None:
        """A message on the socket (the worker reads it once out of its ring loop)."""
        if self.channel is not None and self.channel.in_ring:
            self._leave_ring()
        if fds:
            socket.send_fds(self.sock, [message], list(fds))
        else:
            self.sock.send(message)

    def enter_ring(self) -> None:
        """Back into the ring loop after socket messages (a dead worker is found by the call)."""
        try:
            self.sock.send(b"R")
            self.channel.in_ring = True
        except OSError:
            pass

    def _leave_ring(self) -> None:
        """Asks the worker out of its ring loop, and waits until it is (a worker
        that died meanwhile fails the next send instead)."""
        channel = self.channel
        channel.claim()
        try:
            channel.in_ring = False
            if not channel.idle():  # a call abandoned mid-way: the worker is replaced, not asked
                return
            channel.post_yield()
            while not (channel.spin(RING_SPIN_NS) or channel.wait(RING_SLICE_SECONDS)):
                if not self.alive():
                    return
        finally:
            channel.release()

    # -- memory ----------------------------------------------------------------
    def new_region_id(self) -> int:
        self._next_region += 1
        return self._next_region

    def send_cuda_region(self, region_id: int, handle: bytes, size: int,
                         allocation: tuple[int, int, int] | None = None) -> None:
        """An IPC handle for the worker to open as region_id (cuda_memory.py), of an
        allocation of `size` bytes. allocation: (base, end, buffer id), which the call
        channel's fast path then knows."""
        self._send(wire.CUDA_REGION_HEAD.pack(b"G", region_id, size) + handle)
        if allocation is not None and self.channel is not None:
            self.channel.add_cuda_allocation(*allocation, region_id)

    def drop_cuda_region(self, region_id: int) -> None:
        if self.channel is not None:
            self.channel.drop_storage(region_id)
        self._send(wire.DROP.pack(b"X", region_id))

    # -- requests --------------------------------------------------------------
    def launcher_id(self, library: str, symbol: str, cubin: str, kinds: str, item_sizes, timeout: float,
                    entry: str = "") -> int:
        """entry: the library's entry symbol, for a launcher the worker's ring loop calls."""
        entry = entry if self.channel is not None else ""
        key = (library, symbol, cubin, kinds, entry)
        found = self.launchers.get(key)
        if found is not None and (not cubin or self.bound_cubins.get(library) == cubin):
            return found
        # New, or its library now serves another build's cubin (an edit of
        # device code alone, then its revert): loaded again, which binds it.
        launcher_id = found or len(self.launchers) + 1
        reply = self.request(wire.pack_load(launcher_id, kinds, library, symbol, cubin, item_sizes, entry), timeout)
        if reply[:1] != b"K":
            from registry.errors import OpCallError

            raise OpCallError(reply[1:].decode(errors="replace"))
        self.launchers[key] = launcher_id
        if cubin:
            self.bound_cubins[library] = cubin
        return launcher_id

    def request(self, message: bytes, timeout: float, ring: bool = False) -> bytes:
        """The worker's reply. Raises WorkerDied, WorkerTimeout, or
        KeyboardInterrupt (Ctrl-C while waiting); after any of them the
        worker is gone and the caller replaces it. ring: a call ("C") of a
        launcher loaded with its entry, sent through the call channel."""
        channel = self.channel
        if ring and channel is not None:
            if not channel.in_ring:
                self.enter_ring()
            channel.claim()
            try:
                channel.post(message)
                if not channel.spin(channel.spin_ns):
                    self.ring_wait(timeout)
                return channel.reply()
            finally:
                channel.release()
        sock = self.sock
        try:
            if channel is not None and channel.in_ring:
                self._leave_ring()
            sock.send(message)
        except OSError:
            raise self._died() from None
        # A short call answers within microseconds: a few non-blocking reads
        # first (a blocking wait costs a wake-up of this process), then wait
        # in short slices, so Ctrl-C is seen at once (Python runs the handler
        # and poll raises KeyboardInterrupt, or the wait finds it recorded).
        recv_into, buffer = sock.recv_into, self._reply
        size = None
        for _ in range(SPIN_READS):
            try:
                size = recv_into(buffer, 0, socket.MSG_DONTWAIT)
                break
            except BlockingIOError:
                continue
        if size is None and self.backend == "cuda":
            size = self._spin(min(CUDA_SPIN_SECONDS, timeout))
        if size is None:
            size = self._wait(timeout)
        if not size:
            raise self._died()
        return self._reply_view[:size].tobytes()

    def _spin(self, seconds: float) -> int | None:
        recv_into, buffer, clock = self.sock.recv_into, self._reply, time.perf_counter
        until = clock() + seconds
        while clock() < until:
            try:
                return recv_into(buffer, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
        return None

    def _wait(self, timeout: float) -> int:
        def reply(seconds: float):
            if not self._poller.poll(seconds * 1000):
                return None
            try:
                return self.sock.recv_into(self._reply)
            except OSError:
                return 0

        return self._wait_in_slices(timeout, WAIT_SLICE_SECONDS, reply)

    def ring_wait(self, timeout: float) -> None:
        """Waits for the reply on the call channel, as _wait on the socket:
        raises WorkerDied (the socket hung up: the worker is gone), WorkerTimeout
        or KeyboardInterrupt."""
        channel = self.channel

        def reply(seconds: float):
            if channel.wait(seconds):
                return True
            if any(events & (select.POLLHUP | select.POLLERR) for _, events in self._poller.poll(0)):
                return True if channel.wait(0) else _HUNG_UP  # replied, then exited; or gone
            return None

        if self._wait_in_slices(timeout, RING_SLICE_SECONDS, reply) is _HUNG_UP:
            raise self._died()

    def _wait_in_slices(self, timeout: float, slice_seconds: float, attempt):
        """attempt(seconds) until it gives something other than None, which is
        returned. Past `timeout` the worker is killed and WorkerTimeout raised; a
        Ctrl-C (also one whose KeyboardInterrupt was dropped, interrupts.py)
        kills it and raises KeyboardInterrupt. Ctrl-C is recorded only once the
        wait passed WAIT_SLICE_SECONDS: a shorter call pays nothing for it."""
        arm_after = max(1, round(WAIT_SLICE_SECONDS / slice_seconds))
        try:
            deadline = time.monotonic() + timeout
            slices = 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise WorkerTimeout()
                if WATCH.seen:
                    self.kill()
                    raise KeyboardInterrupt
                if slices == arm_after:
                    WATCH.arm()
                slices += 1
                try:
                    result = attempt(min(left, slice_seconds))
                except BaseException:
                    self.kill()
                    raise
                if result is not None:
                    return result
        finally:
            WATCH.disarm_unless_held()

    def _died(self) -> WorkerDied:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        log = self.read_log()
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            return WorkerDied(f"the worker died of {sig.name} ({SIGNAL_MEANING.get(sig, 'a fatal signal')})", log)
        last = next((line.strip() for line in reversed(log.splitlines()) if line.strip()), "")
        return WorkerDied(f"the worker exited with status {code}" + (f" ({last})" if last else "")
                          + f"; its log is {self.log_path}", log)

    def read_new_log(self) -> str:
        """What the worker wrote to its log since the last read_new_log."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_read)
                text = log.read()
        except OSError:
            return ""
        self._log_read += len(text)
        return text.decode(errors="replace")

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        self.drop_channel()
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # compute-sanitizer's children too
            except OSError:
                self.process.kill()
        self.process.wait()
        self.sock.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def drop_channel(self) -> None:
        """The fast path stops using this worker's channel (its counts stay readable)."""
        if self.channel is not None:
            from registry import _core

            _core.drop_call_channel(self.channel)


class Supervisor:
    """The workers of this process, by (flavor, backend); a lock serializes calls."""

    def __init__(self):
        self.lock = threading.RLock()
        self.workers: dict[tuple[str, str], Worker] = {}
        self.started = 0  # how many workers this process has started
        self.faults = 0
        self.last_start_seconds = 0.0

    def worker(self, flavor: str, backend: str, ordinal: int = 0) -> Worker:
        worker = self.workers.get((flavor, backend))
        if worker is not None and worker.channel is not None and worker.channel.broken:
            self.retire(worker)  # a call was abandoned in its channel (an interrupted wait): start afresh
            worker = None
        if worker is not None:  # one that died is retired by the call that saw it (or fails its next send)
            return worker
        from registry.isolation import launch_env

        # Starting takes milliseconds (more on a loaded machine): a Ctrl-C now
        # must not be lost (interrupts.py).
        WATCH.arm()
        try:
            command, env = launch_env.command(flavor)
            log_dir = launch_env.log_dir()
            if not self.started:  # the first worker of this process: stop them all at exit
                atexit.register(self.shutdown)
            self.started += 1
            worker = Worker(flavor, backend, ordinal, command, env,
                            log_dir / f"worker-{os.getpid()}-{flavor}-{backend}-{self.started}.log")
            self.last_start_seconds = worker.start_seconds
            self.workers[(flavor, backend)] = worker
            if WATCH.seen:  # a Ctrl-C whose KeyboardInterrupt was dropped: the started worker stays for the next call
                raise KeyboardInterrupt
            return worker
        finally:
            WATCH.disarm_unless_held()

    def retire(self, worker: Worker, finishing: bool = False) -> None:
        """After a fault, a timeout or an interrupt: the next call starts a new one.
        finishing: the worker is exiting by itself (a device fault); a sanitizer
        around it writes its report as it ends, so it gets a few seconds."""
        if finishing and worker.alive():
            try:
                worker.process.wait(timeout=20 if worker.flavor == "memcheck" else 2)
            except subprocess.TimeoutExpired:
                pass
        worker.drop_channel()
        worker.kill() if worker.alive() else worker.sock.close()
        if self.workers.get((worker.flavor, worker.backend)) is worker:
            del self.workers[(worker.flavor, worker.backend)]

    def shutdown(self) -> None:
        for worker in list(self.workers.values()):
            self.retire(worker)


SUPERVISOR = Supervisor()


def status_lines(kernel: str, backend: str) -> list[str]:
    """What registry.status() says about isolation in this process."""
    lines = []
    for (flavor, worker_backend), worker in SUPERVISOR.workers.items():
        if worker_backend != backend:
            continue
        refused = getattr(worker, "ipc_refused", "")
        memory = ((f"CUDA IPC; {worker.staged_calls} of {worker.calls} calls staged {worker.staged_bytes} bytes "
                   f"through device copies ({refused})" if refused else "CUDA IPC, no copies") if backend == "cuda" else
                  f"CPU tensors in shared memory; {worker.staged_calls} of {worker.calls} calls staged "
                  f"{worker.staged_bytes} bytes through a copy (arguments under a page, outputs under 64 KiB)"
                  + (f"; {worker.channel.calls} calls through the shared-memory call channel without Python"
                     if getattr(worker, "channel", None) is not None else ""))
        lines.append(f"  isolated worker ({flavor}): pid {worker.process.pid}, {worker.calls} calls; {memory}")
    if SUPERVISOR.started:
        lines.append(f"  isolation: {SUPERVISOR.started} workers started in this process, {SUPERVISOR.faults} faults")
    return lines
