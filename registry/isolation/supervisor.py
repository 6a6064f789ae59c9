"""The worker processes of this process: started on the first isolated call,
reused, replaced after a fault (see registry/isolation/__init__.py).

One worker per flavor and backend: "plain" runs launchers as they are,
"asan" is started with libasan preloaded (checked CPU builds), "memcheck"
under compute-sanitizer (checked CUDA builds). A worker holds what was sent
to it (loaded launchers, mapped memory); a new worker starts empty and gets
it again on its next call.
"""
from __future__ import annotations

import collections
import ctypes
import mmap
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from registry.isolation import wire

SPIN_READS = 100  # non-blocking reads before a blocking wait (~50 us)
# A CUDA call waits for a device kernel, which may run for milliseconds; a
# blocking wait would add a wake-up of this process (tens of microseconds with
# Python) to every call, a bubble on the GPU between back-to-back calls. Spin
# this long first, as the CUDA runtime's own default synchronization does.
CUDA_SPIN_SECONDS = 0.02

WATCH_SECONDS = 0.01  # how often the watchdog looks at calls in flight
DRAIN_POLL_SECONDS = 0.0002  # how often a host wait for calls in flight looks

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


class InFlight:
    """An asynchronous CUDA call the worker launched and the device has not finished."""

    __slots__ = ("number", "launched", "timeout", "kernel", "op", "dtype")

    def __init__(self, number: int, timeout: float, kernel: str, op: str, dtype: str):
        self.number, self.launched, self.timeout = number, time.monotonic(), timeout
        self.kernel, self.op, self.dtype = kernel, op, dtype


def reached(value: int, number: int) -> bool:
    """Whether call number `value` is at or past `number` (u32, wrapping as the device compares)."""
    return ((value - number) & 0xFFFFFFFF) < 0x80000000


class CpuRegion:
    __slots__ = ("id", "base", "end", "storage")

    def __init__(self, region_id: int, base: int, size: int, storage):
        self.id, self.base, self.end, self.storage = region_id, base, base + size, storage


class Worker:
    """One running worker and what it holds."""

    def __init__(self, flavor: str, backend: str, ordinal: int, command: list[str], env: dict, log_path: Path):
        self.flavor, self.backend, self.ordinal, self.log_path = flavor, backend, ordinal, log_path
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
        self.cpu_regions: dict[int, CpuRegion] = {}  # storage base -> region
        self.cuda_regions: dict[int, tuple[int, int]] = {}  # allocation base -> (buffer id, region id)
        self._next_region = 1  # 0 is reserved for the staging buffer's first region
        self.staging = None  # (region id, mmap, address, size)
        self.staged_calls = self.staged_bytes = 0
        self.pool_regions = {}  # shared output pool segment id -> region id in this worker
        self.calls = 0
        # Asynchronous CUDA calls (cuda_gate.py): the gate, the calls in flight, and
        # a fault the device raised after a call returned (reported at the next call).
        self.gate = None
        self.gate_refused = ""  # why calls wait on the host instead, if they do
        self.finished = None  # the shared page's u64: the last call the worker saw finish
        self.in_flight: collections.deque[InFlight] = collections.deque()
        self.head_since = 0.0  # when the oldest call in flight became the oldest
        self.deferred = None  # a proxy.Fault, once the worker is gone
        self.retired = False
        self.async_lock = threading.Lock()  # the watchdog's and the caller's handling of the end of a worker
        self._log_read = 0
        self._poller = select.poll()
        # Replies are read into one buffer made here: a bytes object allocated
        # per read (failed non-blocking reads included) costs the spin.
        self._reply = bytearray(wire.MAX_MESSAGE)
        self._reply_view = memoryview(self._reply)
        self._poller.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.sock.send(wire.HELLO.pack(b"H", wire.VERSION, b"g" if backend == "cuda" else b"c", ordinal,
                                       flavor != "plain"))

    # -- memory ----------------------------------------------------------------
    def new_region_id(self) -> int:
        self._next_region += 1
        return self._next_region

    def share_cpu_storage(self, storage) -> None:
        """Give the worker a CPU storage that lives in shared memory (moved
        there in place, once: torch's fd-backed shared memory)."""
        base = storage.data_ptr()
        region = self.cpu_regions.get(base)
        if region is not None and region.storage() is storage:
            return
        try:
            fd, size = storage._share_fd_cpu_()
        except RuntimeError:  # shared another way (file_system strategy) or not shareable: staged instead
            return
        import weakref

        base = storage.data_ptr()  # moved into shared memory: a new address
        stale = self.cpu_regions.get(base)
        if stale is not None:
            self.sock.send(wire.DROP.pack(b"X", stale.id))
        if len(self.cpu_regions) >= 64:
            self.drop_dead_regions()
        region = CpuRegion(self.new_region_id(), base, size, weakref.ref(storage))
        socket.send_fds(self.sock, [wire.CPU_REGION.pack(b"M", region.id, size)], [fd])
        self.cpu_regions[base] = region

    def cpu_region_of(self, address: int, nbytes: int):
        """(region id, offset) of shared memory holding [address, address + nbytes), or None."""
        for region in self.cpu_regions.values():  # a handful: the storages of recent arguments
            if region.base <= address and address + nbytes <= region.end:
                if region.storage() is None:
                    # Freed: its range may now hold other memory (this one), which the
                    # worker's old mapping does not show. Forget it, stage instead.
                    self.drop_dead_regions()
                    return None
                return region.id, address - region.base
        return None

    def pool_region_of(self, address: int, nbytes: int):
        """(region id, offset) of an output the binding allocated from the
        shared output pool (core/shared_output_pool.h), or None. A segment's fd
        goes to this worker once; segments the pool unmapped are dropped here."""
        from registry import _core

        if nbytes < _core.SHARED_OUTPUT_MIN_BYTES:  # the pool hands out nothing smaller
            return None
        for segment_id in _core.shared_output_take_retired():
            for worker in SUPERVISOR.workers.values():
                region = worker.pool_regions.pop(segment_id, None)
                if region is not None:
                    worker.sock.send(wire.DROP.pack(b"X", region))
        found = _core.shared_output_segment(address, nbytes)
        if found is None:
            return None
        segment_id, fd, base, size = found
        region = self.pool_regions.get(segment_id)
        if region is None:
            region = self.pool_regions[segment_id] = self.new_region_id()
            socket.send_fds(self.sock, [wire.CPU_REGION.pack(b"M", region, size)], [fd])
        return region, address - base

    def drop_dead_regions(self) -> None:
        for base, region in list(self.cpu_regions.items()):
            if region.storage() is None:
                del self.cpu_regions[base]
                self.sock.send(wire.DROP.pack(b"X", region.id))

    def staging_buffer(self, size: int) -> tuple[int, int]:
        """(region id, address) of a shared buffer of at least `size` bytes."""
        if self.staging is None or self.staging[3] < size:
            size = max(size, 1 << 20, 2 * (self.staging[3] if self.staging else 0))
            fd = os.memfd_create("kreg-staging")
            os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size)
            region_id = self.new_region_id()
            socket.send_fds(self.sock, [wire.CPU_REGION.pack(b"M", region_id, size)], [fd])
            os.close(fd)
            if self.staging is not None:
                self.sock.send(wire.DROP.pack(b"X", self.staging[0]))
            self.staging = (region_id, mapping, ctypes.addressof(ctypes.c_char.from_buffer(mapping)), size)
        return self.staging[0], self.staging[2]

    # -- requests --------------------------------------------------------------
    def launcher_id(self, library: str, symbol: str, cubin: str, kinds: str, item_sizes, timeout: float) -> int:
        key = (library, symbol, cubin, kinds)
        found = self.launchers.get(key)
        if found is not None:
            return found
        launcher_id = len(self.launchers) + 1
        reply = self.request(wire.pack_load(launcher_id, kinds, library, symbol, cubin, item_sizes), timeout)
        if reply[:1] != b"K":
            from registry.errors import OpCallError

            raise OpCallError(reply[1:].decode(errors="replace"))
        self.launchers[key] = launcher_id
        return launcher_id

    def request(self, message: bytes, timeout: float) -> bytes:
        """The worker's reply. Raises WorkerDied, WorkerTimeout, or
        KeyboardInterrupt (Ctrl-C while waiting); after any of them the
        worker is gone and the caller replaces it."""
        sock = self.sock
        try:
            sock.send(message)
        except OSError:
            raise self._died() from None
        # A short call answers within microseconds: a few non-blocking reads
        # first (a blocking wait costs a wake-up of this process), then wait
        # in slices of at most a second, so Ctrl-C is seen at once (Python
        # runs the handler and poll raises KeyboardInterrupt).
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
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout()
            try:
                ready = self._poller.poll(min(left, 1.0) * 1000)
            except BaseException:
                self.kill()
                raise
            if ready:
                try:
                    return self.sock.recv_into(self._reply)
                except OSError:
                    return 0

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
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # compute-sanitizer's children too
            except OSError:
                self.process.kill()
        self.process.wait()
        self.sock.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    # -- asynchronous CUDA calls -----------------------------------------------
    def check_in_flight(self) -> None:
        """Forget the calls the device finished; settle a worker that died or
        whose oldest call outlived its timeout. Any thread; never blocks on the
        user's stream (the watchdog runs it while that stream may wait)."""
        with self.async_lock:
            if self.retired or self.deferred is not None or not self.in_flight:
                return
            now = time.monotonic()
            finished, in_flight = self.finished.value, self.in_flight
            while in_flight and reached(finished, in_flight[0].number):
                in_flight.popleft()
                self.head_since = now
            if not in_flight:
                return
            head = in_flight[0]
            if self.process.poll() is not None:
                self._settle(hang=False)
            elif now - max(head.launched, self.head_since) > head.timeout:
                self.stop()
                self._settle(hang=True)

    def stop(self) -> None:
        """Kill the process and reap it, leaving the socket to the thread that owns it."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
        self.process.wait()

    def _settle(self, hang: bool) -> None:
        """The worker is gone with calls in flight (the caller holds async_lock):
        find the first call the device did not finish, open the gate, and keep
        the fault for the next call to raise."""
        from registry.isolation.proxy import Fault

        passed = self.gate.passed()
        culprit = next((call for call in self.in_flight if not reached(passed, call.number)), None)
        if culprit is None:  # every call had finished: the worker died afterwards (its exit is seen at the next call)
            self.in_flight.clear()
            self.gate.release()
            return
        log = self.read_log()
        marked = next((line.split(wire.ASYNC_FAULT_LOG, 1)[1].strip() for line in reversed(log.splitlines())
                       if wire.ASYNC_FAULT_LOG in line), "")
        if hang:
            what = (f"the call did not finish on the device within {culprit.timeout:g} s: the worker was killed "
                    f"(an endless loop, a deadlock, or a kernel slower than the timeout; raise "
                    f"REGISTRY_ISOLATE_TIMEOUT or pass timeout= to op.call() if it is only slow)")
        elif marked:
            what = f"the kernel faulted on the device: {marked}"
        else:
            what = self._died().what
        # Kept before the gate opens: a thread the open gate wakes (a torch synchronize,
        # then registry.synchronize()) must find the fault, not an empty list of calls.
        self.deferred = Fault(what, log, culprit.dtype, hang=hang, cuda=True, kernel=culprit.kernel, op=culprit.op)
        self.in_flight.clear()
        self.gate.release()


class Supervisor:
    """The workers of this process, by (flavor, backend); a lock serializes calls."""

    def __init__(self):
        self.lock = threading.RLock()
        self.workers: dict[tuple[str, str], Worker] = {}
        self.started = 0  # how many workers this process has started
        self.faults = 0
        self.last_start_seconds = 0.0
        self._watching = threading.Event()  # set while asynchronous calls are in flight
        self._watchdog = None

    def worker(self, flavor: str, backend: str, ordinal: int = 0) -> Worker:
        worker = self.workers.get((flavor, backend))
        if worker is not None:  # one that died is retired by the call that saw it (or fails its next send)
            return worker
        from registry.isolation import launch_env

        command, env = launch_env.command(flavor)
        log_dir = launch_env.log_dir()
        self.started += 1
        worker = Worker(flavor, backend, ordinal, command, env,
                        log_dir / f"worker-{os.getpid()}-{flavor}-{backend}-{self.started}.log")
        self.last_start_seconds = worker.start_seconds
        self.workers[(flavor, backend)] = worker
        return worker

    def retire(self, worker: Worker, finishing: bool = False) -> None:
        """After a fault, a timeout or an interrupt: the next call starts a new one.
        finishing: the worker is exiting by itself (a device fault); a sanitizer
        around it writes its report as it ends, so it gets a few seconds.
        Calls of its still in flight are settled first (worker.deferred: the
        first the device did not finish), and its gate opened, before any new
        worker can write the gate."""
        if finishing and worker.alive():
            try:
                worker.process.wait(timeout=20 if worker.flavor == "memcheck" else 2)
            except subprocess.TimeoutExpired:
                pass
        with worker.async_lock:
            worker.stop()
            if worker.in_flight and worker.deferred is None:
                worker._settle(hang=False)
            elif worker.gate is not None:
                worker.gate.release()
            worker.retired = True
            worker.sock.close()
        if self.workers.get((worker.flavor, worker.backend)) is worker:
            del self.workers[(worker.flavor, worker.backend)]

    # -- asynchronous CUDA calls -----------------------------------------------
    def watch(self) -> None:
        """A call went in flight: the watchdog checks it until the device finishes it."""
        if not self._watching.is_set():
            self._watching.set()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="registry-isolation-watchdog", daemon=True)
                self._watchdog.start()

    def _watch(self) -> None:
        # Why a thread: after an asynchronous call returns, the user's thread may
        # block in torch (a synchronize, a copy to the host) on a stream that
        # waits for the worker. If the worker hangs or dies there, only this
        # thread can kill it and open the gate.
        while True:
            self._watching.wait()
            time.sleep(WATCH_SECONDS)
            for worker in list(self.workers.values()):
                if worker.in_flight:
                    worker.check_in_flight()
            if not self._busy():
                self._watching.clear()
                if self._busy():  # a call went in flight between the check and the clear
                    self._watching.set()

    def _busy(self) -> bool:
        return any(w.in_flight and w.deferred is None and not w.retired for w in list(self.workers.values()))

    def drain(self, worker: Worker | None = None) -> None:
        """Wait (on the host, interruptibly) until the device finished every
        asynchronous call of `worker` (default: all workers), or their worker
        is settled. Then the user's stream waits on no worker."""
        for each in ([worker] if worker is not None else list(self.workers.values())):
            try:
                while each.in_flight and each.deferred is None and not each.retired:
                    each.check_in_flight()
                    if each.in_flight and each.deferred is None:
                        time.sleep(DRAIN_POLL_SECONDS)
            except BaseException:  # Ctrl-C: the calls in flight are abandoned with their worker
                self.retire(each)
                raise

    def pending(self) -> bool:
        """Asynchronous calls in flight, or a fault one left, in any worker."""
        return any(w.in_flight or w.deferred is not None for w in list(self.workers.values()))

    def take_deferred(self, worker: Worker):
        """The fault of an earlier asynchronous call of `worker`, if one is kept;
        the worker is retired."""
        fault = worker.deferred
        if fault is not None:
            self.retire(worker)
            self.faults += 1
        return fault

    def synchronize(self) -> None:
        """registry.synchronize(): every asynchronous call finished; a fault one
        of them raised after it returned is raised here, as KernelFault."""
        with self.lock:
            self.drain()
            for worker in list(self.workers.values()):
                fault = self.take_deferred(worker)
                if fault is not None:
                    from registry.isolation.handle import kernel_fault

                    raise kernel_fault(fault, worker.backend)

    def shutdown(self) -> None:
        for worker in list(self.workers.values()):
            self.retire(worker)


SUPERVISOR = Supervisor()
