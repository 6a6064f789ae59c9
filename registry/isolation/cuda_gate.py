"""The parent's side of asynchronous CUDA calls (wire.py, "Asynchronous CUDA
calls"): device order between the user's stream and a worker's stream, with
no host waiting for a kernel.

One Gate per device of this process, shared by the workers it starts one
after another: a u32 gate word in device memory, an inter-process event
recorded on the user's stream before each call, a non-blocking side stream
of the parent's own, and the call numbers (never reused in a process, so a
replacement worker's calls order after its predecessor's).

Why the gate word is the parent's memory and not the worker's event: the
user's stream waits on it, and a worker that faults, hangs or is killed must
never leave that stream waiting. The parent releases it (writes the last
call number from its side stream) once the worker is gone: memory of a
healthy context, written by a healthy stream.

Each worker also gets a shared page (wire.py "A"): the worker sets its first
u64 to the last call its device stream finished, so the parent's watchdog
(supervisor.py) tells a long call from a hang without asking the device.
"""
from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import socket

from registry.isolation import wire

CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS = 0x2, 0x4
CU_STREAM_NON_BLOCKING = 0x1
CU_STREAM_WAIT_VALUE_GEQ = 0x0  # (int32_t)(*addr - value) >= 0: wraps around correctly

_gates: dict[int, "Gate"] = {}  # device ordinal -> its gate


class GateUnavailable(Exception):
    """This driver or device refuses stream memory operations or IPC events:
    calls fall back to waiting on the host (registry.status() says why)."""


def gate(ordinal: int) -> "Gate":
    found = _gates.get(ordinal)
    if found is None:
        found = _gates[ordinal] = Gate(ordinal)
    return found


class Gate:
    def __init__(self, ordinal: int):
        from registry.isolation import cuda_memory

        driver = cuda_memory._cuda()["lib"]
        self._lib = driver

        def entry(name, *argtypes):
            function = getattr(driver, name + "_v2", None) or getattr(driver, name)
            function.argtypes = list(argtypes)
            return function

        def check(result: int, what: str) -> None:
            if result != 0:
                raise GateUnavailable(f"{what} failed (CUDA error {result})")

        self.ordinal = ordinal
        self.context = ctypes.c_void_p()  # torch's: the device's primary context
        device = ctypes.c_int()
        check(driver.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device), "cuDevicePrimaryCtxRetain")
        with self._current():
            self._make(driver, entry, check)

    def _make(self, driver, entry, check) -> None:
        word = ctypes.c_uint64()
        check(entry("cuMemAlloc", ctypes.c_void_p, ctypes.c_size_t)(ctypes.byref(word), 4096), "cuMemAlloc (gate)")
        self.word = word.value
        self.memory_handle = (ctypes.c_char * 64)()
        check(entry("cuIpcGetMemHandle", ctypes.c_void_p, ctypes.c_uint64)(ctypes.byref(self.memory_handle),
                                                                            self.word), "cuIpcGetMemHandle (gate)")
        self.event = ctypes.c_void_p()
        check(driver.cuEventCreate(ctypes.byref(self.event), CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS),
              "cuEventCreate (interprocess)")
        self.event_handle = (ctypes.c_char * 64)()
        check(driver.cuIpcGetEventHandle(ctypes.byref(self.event_handle), self.event), "cuIpcGetEventHandle")
        self.side = ctypes.c_void_p()
        check(driver.cuStreamCreate(ctypes.byref(self.side), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self._record = entry("cuEventRecord", ctypes.c_void_p, ctypes.c_void_p)
        self._wait = entry("cuStreamWaitValue32", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint)
        self._write = entry("cuStreamWriteValue32", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint)
        self._sync = entry("cuStreamSynchronize", ctypes.c_void_p)
        self._read = entry("cuMemcpyDtoHAsync", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p)
        self.number = 0  # the last call number handed out
        # The word starts at 0, and so do the numbers: try the memory operations once here,
        # so a device without them is found before any call depends on them.
        check(self._write(self.side, self.word, 0, 0), "cuStreamWriteValue32")
        check(self._wait(self.side, self.word, 0, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32")
        check(self._sync(self.side), "cuStreamSynchronize (gate)")

    # -- per call (the caller holds SUPERVISOR.lock) ---------------------------
    def before(self, stream) -> int:
        """Record the user's stream's position; the call's number."""
        result = self._record(self.event, stream)
        if result != 0:
            from registry.isolation.cuda_memory import _check

            _check(result, "cuEventRecord (before an isolated call)")
        self.number = (self.number + 1) & 0xFFFFFFFF
        return self.number

    def after(self, stream, number: int) -> None:
        """The user's stream waits until the worker's stream passed call `number`."""
        result = self._wait(stream, self.word, number, CU_STREAM_WAIT_VALUE_GEQ)
        if result != 0:
            from registry.isolation.cuda_memory import _check

            _check(result, "cuStreamWaitValue32 (after an isolated call)")

    # -- any thread ------------------------------------------------------------
    def release(self) -> None:
        """Open the gate to the last number handed out: after the worker that
        would have written it is gone (killed, faulted, timed out)."""
        with self._current():
            self._write(self.side, self.word, self.number, 0)
            self._sync(self.side)

    def passed(self) -> int:
        """The gate word: the last call whose kernel the worker's stream finished
        (read from the device, through the side stream, never the user's)."""
        value = ctypes.c_uint32()
        with self._current():
            self._read(ctypes.byref(value), self.word, 4, self.side)
            self._sync(self.side)
        return value.value

    @contextlib.contextmanager
    def _current(self):
        # Pushed, not set: the calling thread's context (torch's current device
        # in the user's thread; none in the watchdog's) is back afterwards.
        self._lib.cuCtxPushCurrent_v2(self.context)
        try:
            yield
        finally:
            self._lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def share_with(self, worker) -> None:
        """Send the worker the gate (wire.py "A") and a page it publishes its finished calls in."""
        fd = os.memfd_create("kreg-finished")
        os.ftruncate(fd, mmap.PAGESIZE)
        worker.finished_page = mmap.mmap(fd, mmap.PAGESIZE)
        worker.finished = ctypes.c_uint64.from_buffer(worker.finished_page)
        worker.finished.value = self.number  # nothing of this worker's is in flight yet
        socket.send_fds(worker.sock, [wire.GATE_HEAD.pack(b"A") + bytes(self.memory_handle) + bytes(self.event_handle)],
                        [fd])
        os.close(fd)
        worker.gate = self
