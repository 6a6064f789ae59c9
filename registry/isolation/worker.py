"""The isolated-launch worker: runs kernel launchers for one parent process.

Started by supervisor.py as `python -I -S .../registry/isolation/worker.py FD`
(a script, not `-m registry...`: it imports neither torch nor the registry
package, so it starts in a few tens of milliseconds). FD is its end of a
SOCK_SEQPACKET pair; the messages are those of wire.py. It loads the kernel
libraries the parent names (dlopen, RTLD_LOCAL; a cubin is loaded with the
driver API and bound as registry/device/driver_module.py does), maps the memory the
parent shares (CPU: the fds of shared storages, mmap'ed; CUDA: IPC handles),
calls a launcher through a prototype built from the signature's argument
kinds, and replies with the launcher's error string or nothing.

A plain worker (CPU or CUDA) runs its calls in C++: the parent sends it a call channel
(wire.py's "Q": a memfd, core/call_ring.h) and the path of the registry's
core module, which it loads with ctypes (a plain shared library to it; no
torch, no Python init). On "R" it enters the module's ring loop
(core/ring_worker.h), which calls the kernel library's entry for each "C"
message (on CUDA with this worker's stream, waited for as Cuda.finish does)
and returns here only when the parent yields (memory to map, a launcher to
load). Everything it needs is registered with the loop as it
arrives here (launchers, regions).

A kernel that faults on the CPU kills this process (SIGSEGV, SIGBUS, ...):
that is the point, the parent sees the socket close and reports the signal.
On CUDA, the worker waits for its own stream after each launch; a sticky
error (illegal address, misaligned address, device assert, trap) is replied
as a fault and the worker exits, since its context can no longer be used.
"""
import ctypes
import os
import signal
import socket
import struct
import sys
import time

import guard_pages
import wire
from wire import CTYPE_OF_KIND, KregIntList
_Q = struct.Struct("<q")
_F = struct.Struct("<f")
_D = struct.Struct("<d")
_B = struct.Struct("<B")
_I = struct.Struct("<i")


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]  # CUipcMemHandle


class Cuda:
    """The driver API this worker needs, and its context and stream."""

    def __init__(self, ordinal: int):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")
        device = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        self.device, self.images = device.value, []
        self.context = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device), "cuDevicePrimaryCtxRetain")
        self._check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = ctypes.c_void_p()
        self._check(self.entry("cuStreamCreate")(ctypes.byref(self.stream), 1), "cuStreamCreate")  # non-blocking
        self.open_ipc = self.entry("cuIpcOpenMemHandle")
        self.open_ipc.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
        self.synchronize = self.entry("cuStreamSynchronize")
        self.synchronize.argtypes = [ctypes.c_void_p]
        self.query = self.entry("cuStreamQuery")
        self.query.argtypes = [ctypes.c_void_p]

    def finish(self) -> int:
        """Wait for this worker's stream; its CUDA result. Polled for the first
        FINISH_SPIN_SECONDS: cuStreamSynchronize here woke ~100 us after the
        kernel ended, a gap on the device between back-to-back calls (on the
        H200 an isolated call at 2^28 elements cost 19.4 % over the normal op
        with it, 5.9 % polled). A longer kernel is waited for without a spinning core."""
        query, stream, clock = self.query, self.stream, time.perf_counter
        until = clock() + FINISH_SPIN_SECONDS
        while True:
            result = query(stream)
            if result != CUDA_ERROR_NOT_READY:
                return result
            if clock() > until:
                return self.synchronize(stream)

    def entry(self, name: str):
        # cuda.h maps several names to a versioned symbol (cuIpcOpenMemHandle_v2, ...).
        for symbol in (name + "_v2", name):
            if hasattr(self.lib, symbol):
                return getattr(self.lib, symbol)
        raise OSError(f"the CUDA driver has no {name}")

    def error_text(self, result: int) -> str:
        text = ctypes.c_char_p()
        self.lib.cuGetErrorString(result, ctypes.byref(text))
        name = ctypes.c_char_p()
        self.lib.cuGetErrorName(result, ctypes.byref(name))
        return f"{(name.value or b'CUDA error').decode()} ({result}): {(text.value or b'').decode()}"

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            raise OSError(f"{what} failed: {self.error_text(result)}")

    def map_ipc(self, handle: bytes) -> int:
        pointer = ctypes.c_uint64()
        # The handle is passed by value (a 64-byte struct), not as a pointer.
        self._check(self.open_ipc(ctypes.byref(pointer), IpcHandle.from_buffer_copy(handle), 1),
                    "cuIpcOpenMemHandle")  # 1: lazy peer access
        return pointer.value

    def bind_cubin(self, library, cubin: str) -> None:
        """As registry/device/driver_module.py's bind: kreg_bind_device_module
        (kreg/launch_runtime.cc) with the image, this context's module and device."""
        self.images.append(open(cubin, "rb").read())  # kept alive: the library loads it on other devices
        image = self.images[-1]
        module = ctypes.c_void_p()  # the first of the image's modules; the library loads the others
        self._check(self.lib.cuModuleLoadData(ctypes.byref(module), module_images().split(image)[0]),
                    f"cuModuleLoadData({cubin})")
        # The plain names, as the parent binds them (a _v2 of some has other parameters).
        entries = [ctypes.cast(getattr(self.lib, n), ctypes.c_void_p)
                   for n in ("cuModuleGetFunction", "cuLaunchKernel", "cuGetErrorString", "cuCtxGetDevice",
                             "cuModuleLoadData", "cuFuncSetAttribute")]
        # cuLaunchKernelEx (clusters) came with CUDA 11.8: null before, and kreg_launch_cluster says so.
        entries.append(ctypes.cast(getattr(self.lib, "cuLaunchKernelEx", None), ctypes.c_void_p))
        bind = library.kreg_bind_device_module
        bind.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p] * 7
        bind.restype = None
        bind(image, len(image), module, self.device, *entries)


class Worker:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.launchers = {}  # id -> (function, kinds)
        self.regions = {}  # id -> base address
        self.cuda_region_ends = {}  # CUDA region id -> the end of its allocation
        self.libraries = {}  # launcher library path -> the library
        self.bound_cubins = {}  # launcher library path -> the cubin bound to it
        self.cuda = None
        self.checked = False
        self.ring = None  # the core module, once the parent sent a call channel

    def receive(self, flags: int = 0) -> tuple[bytes, list[int]]:
        """One message and the fds it carries, read into a buffer made once:
        socket.recv_fds would allocate (and map) a fresh 1 MiB buffer per read,
        failed non-blocking reads included, which was most of a short call."""
        size, ancillary, _, _ = self.sock.recvmsg_into([self.buffer], _FD_SPACE, flags)
        fds = []
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += struct.unpack(f"{len(data) // 4}i", data[:len(data) - len(data) % 4])
        return self.view[:size].tobytes(), fds

    def serve(self) -> None:
        self.buffer = bytearray(wire.MAX_MESSAGE)
        self.view = memoryview(self.buffer)
        receive = self.receive
        clock = time.perf_counter
        while True:
            message = None
            for _ in range(SPIN_READS):
                try:
                    message, fds = receive(socket.MSG_DONTWAIT)
                    break
                except BlockingIOError:
                    continue
            if message is None and self.cuda is not None:
                # Back-to-back CUDA calls: the next launch should not wait for a
                # wake-up of this process while the device idles.
                until = clock() + CUDA_SPIN_SECONDS
                while clock() < until:
                    try:
                        message, fds = receive(socket.MSG_DONTWAIT)
                        break
                    except BlockingIOError:
                        continue
            if message is None:
                message, fds = receive()
            if not message:
                return  # the parent closed its end
            what = message[:1]
            if what == b"C":
                self.sock.send(self.call(message))
            elif what == b"M":
                _, region, size = wire.CPU_REGION.unpack_from(message)
                try:
                    mapping = guard_pages.map_region(fds[0], size)
                finally:
                    os.close(fds[0])
                guard_pages.MAPPINGS[region] = mapping
                self.regions[region] = mapping.base
                if self.ring is not None:
                    self.ring.kreg_ring_worker_add_region(region, mapping.base, mapping.end, mapping.reserved,
                                                          mapping.reserved + mapping.length)
            elif what == b"G":
                _, region, size = wire.CUDA_REGION_HEAD.unpack_from(message)
                self.regions[region] = base = self.cuda.map_ipc(message[wire.CUDA_REGION_HEAD.size:])
                self.cuda_region_ends[region] = base + size
                if self.ring is not None:  # device memory: no guard pages for the fault handler to name
                    self.ring.kreg_ring_worker_add_region(region, base, base + size, base, base)
            elif what == b"X":
                _, region = wire.DROP.unpack_from(message)
                self.regions.pop(region, None)
                self.cuda_region_ends.pop(region, None)
                if self.ring is not None:
                    self.ring.kreg_ring_worker_drop_region(region)
                mapping = guard_pages.MAPPINGS.pop(region, None)
                if mapping is not None:  # a launcher's cached parameters may still point there: never used again
                    guard_pages.unmap(mapping)
            elif what == b"R":
                self.ring.kreg_ring_worker_serve(RING_SPIN_NS)  # until the parent yields
            elif what == b"L":
                self.sock.send(self.load(message))
            elif what == b"Q":
                self.attach_ring(message[1:].decode(), fds[0])
            elif what == b"H":
                _, version, backend, ordinal, checked = wire.HELLO.unpack(message)
                self.checked = bool(checked)
                if not self.checked:
                    guard_pages.install_fault_handler()
                if version != wire.VERSION:
                    sys.exit(f"worker speaks version {wire.VERSION}, the parent {version}")
                if backend == b"g":
                    self.cuda = Cuda(ordinal)

    def attach_ring(self, core_path: str, fd: int) -> None:
        core = ctypes.CDLL(core_path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        core.kreg_ring_worker_attach.restype = ctypes.c_char_p
        core.kreg_ring_worker_add_launcher.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                                                       ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)]
        core.kreg_ring_worker_add_region.argtypes = [ctypes.c_uint32] + [ctypes.c_size_t] * 4
        core.kreg_ring_worker_drop_region.argtypes = [ctypes.c_uint32]
        core.kreg_ring_worker_serve.argtypes = [ctypes.c_int64]
        error = core.kreg_ring_worker_attach(fd)  # the mapping keeps the fd
        if error:
            sys.exit(f"the isolated worker could not map its call channel: {error.decode()}")
        if not self.checked:
            core.kreg_ring_worker_install_fault_handler()  # after guard_pages': it passes Python's calls there
        for region, mapping in guard_pages.MAPPINGS.items():
            core.kreg_ring_worker_add_region(region, mapping.base, mapping.end, mapping.reserved,
                                             mapping.reserved + mapping.length)
        cuda = self.cuda
        if cuda is not None:
            for region, base in self.regions.items():
                core.kreg_ring_worker_add_region(region, base, self.cuda_region_ends[region], base, base)
            core.kreg_ring_worker_set_cuda.argtypes = [ctypes.c_void_p] * 8
            core.kreg_ring_worker_set_cuda(cuda.stream, *(ctypes.cast(cuda.lib[n], ctypes.c_void_p) for n in (
                cuda.query.__name__, cuda.synchronize.__name__, "cuGetErrorName", "cuGetErrorString",
                "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemAllocHost_v2")))
        self.ring = core

    def load(self, message: bytes) -> bytes:
        launcher_id, kinds, path, symbol, cubin, item_sizes, entry = wire.unpack_load(message)
        try:
            library = self.libraries.get(path)
            if library is None:
                library = self.libraries[path] = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            # An edit of device code alone keeps the launcher library and brings
            # another cubin: bound again, as the parent's process binds it (a
            # launcher library serves the image bound last).
            if cubin and self.bound_cubins.get(path) != cubin:
                self.cuda.bind_cubin(library, cubin)
                self.bound_cubins[path] = cubin
            address = ctypes.cast(getattr(library, symbol), ctypes.c_void_p).value
            if entry and self.ring is not None:
                self.ring.kreg_ring_worker_add_launcher(
                    launcher_id, ctypes.cast(getattr(library, entry), ctypes.c_void_p).value, address,
                    kinds.encode(), (ctypes.c_int64 * len(kinds))(*item_sizes))
        except (OSError, AttributeError) as error:
            return b"E" + f"the isolated worker could not load {symbol} from {path}: {error}".encode()
        prototype = ctypes.CFUNCTYPE(ctypes.c_void_p, *(CTYPE_OF_KIND[k] for k in kinds), ctypes.c_void_p)
        launcher = (CheckedLauncher if self.checked else Launcher)(prototype(address), kinds)
        launcher.item_sizes = item_sizes
        if self.checked and self.cuda is not None:
            launcher.cuda = self.cuda
        self.launchers[launcher_id] = launcher
        return b"K"

    def call(self, message: bytes) -> bytes:
        _, launcher_id = wire.CALL_HEAD.unpack_from(message)
        launcher = self.launchers[launcher_id]
        guard_pages.CURRENT[0] = launcher  # what a guard page hit is reported against
        error = launcher.call(message, self.regions, self.cuda.stream if self.cuda is not None else None)
        cuda = self.cuda
        if cuda is not None:
            result = cuda.finish()
            if result != 0:
                self.sock.send(b"F" + cuda.error_text(result).encode())
                os._exit(3)  # a faulted context is useless: the parent starts a new worker
        return b"K" if not error else b"E" + ctypes.string_at(error)


class Launcher:
    """A launcher and its parameters, made once and refilled per call (the
    launcher gets them by value, so reusing them is safe)."""

    def __init__(self, function, kinds: str):
        self.function, self.kinds = function, kinds
        self.values = [CTYPE_OF_KIND[k]() for k in kinds]
        self.dims = [None] * len(kinds)  # per tensor parameter: its sizes + strides array
        self.param_regions = {}  # tensor parameter index -> region id (guard_pages names the one hit)

    last = b""  # the previous call's message: the same bytes give the same parameters

    def call(self, message: bytes, regions: dict, stream):
        if message != self.last:  # region ids are never reused, so equal messages mean equal memory
            self.parse(message, regions)
            self.last = message
        return self.function(*self.values, stream)

    def parse(self, message: bytes, regions: dict) -> None:
        at = wire.CALL_HEAD.size
        values = self.values
        for index, kind in enumerate(self.kinds):
            if kind == "T":
                tensor = values[index]
                ndim = _Q.unpack_from(message, at)[0]
                if ndim < 0:
                    tensor.data, tensor.numel, tensor.ndim, tensor.sizes, tensor.strides = None, 0, -1, None, None
                    self.param_regions.pop(index, None)
                    at += 8
                    continue
                _, region, offset, numel = wire.TENSOR_HEAD.unpack_from(message, at)
                at += wire.TENSOR_HEAD.size
                dims = (ctypes.c_int64 * (2 * ndim)).from_buffer_copy(message, at) if ndim else _EMPTY_DIMS
                at += 16 * ndim
                self.dims[index] = dims
                tensor.data = None if region == wire.NO_REGION else regions[region] + offset
                self.param_regions[index] = region
                tensor.numel, tensor.ndim = numel, ndim
                tensor.sizes = ctypes.cast(dims, _INT64_POINTER)
                tensor.strides = ctypes.cast(ctypes.byref(dims, 8 * ndim), _INT64_POINTER)
            elif kind == "f":
                values[index] = _F.unpack_from(message, at)[0]
                at += 4
            elif kind == "d":  # a float argument of a float64 launcher
                values[index] = _D.unpack_from(message, at)[0]
                at += 8
            elif kind == "i":
                values[index] = _Q.unpack_from(message, at)[0]
                at += 8
            elif kind == "b":
                values[index] = bool(message[at])
                at += 1
            elif kind == "s":
                values[index] = _I.unpack_from(message, at)[0]
                at += 4
            else:  # "l"
                count = _Q.unpack_from(message, at)[0]
                items = (ctypes.c_int64 * count).from_buffer_copy(message, at + 8) if count else _EMPTY_DIMS
                at += 8 + 8 * count
                self.dims[index] = items
                values[index] = KregIntList(ctypes.cast(items, _INT64_POINTER), count)


class CheckedLauncher(Launcher):
    """A checked call: each tensor is copied into a buffer of its exact size
    from the sanitizer's allocator (malloc under ASan, cuMemAlloc under
    memcheck), so an access past its end is an error with an address the
    sanitizer can name; the ranges are logged first (wire.CHECKED_CALL_LOG)
    so the parent can say which argument an address is near."""

    cuda = None

    def call(self, message: bytes, regions: dict, stream):
        self.parse(message, regions)
        bounces = []
        ranges = []
        for index, kind in enumerate(self.kinds):
            tensor = self.values[index]
            if kind != "T" or not tensor.data or tensor.ndim < 0:
                continue
            nbytes = tensor.numel * self.item_sizes[index]
            if nbytes == 0:
                continue
            shared = tensor.data
            bounce = self._allocate(nbytes)
            self._copy(bounce, shared, nbytes)
            tensor.data = bounce
            bounces.append((bounce, shared, nbytes))
            ranges.append(f"{index} {bounce:#x} {bounce + nbytes:#x}")
        sys.stderr.write(f"{wire.CHECKED_CALL_LOG} {' '.join(ranges)}\n")
        sys.stderr.flush()
        error = self.function(*self.values, stream)
        if self.cuda is not None and self.cuda.synchronize(stream) != 0:
            return error  # faulted: the worker replies F and exits, nothing to copy back
        for bounce, shared, nbytes in bounces:
            self._copy(shared, bounce, nbytes)
            self._free(bounce)
        return error

    def _allocate(self, nbytes: int) -> int:
        if self.cuda is None:
            return _libc.malloc(nbytes)
        pointer = ctypes.c_uint64()
        self.cuda.entry("cuMemAlloc")(ctypes.byref(pointer), ctypes.c_size_t(nbytes))
        return pointer.value

    def _copy(self, to: int, source: int, nbytes: int) -> None:
        if self.cuda is None:
            ctypes.memmove(to, source, nbytes)
        else:
            self.cuda.entry("cuMemcpy")(ctypes.c_uint64(to), ctypes.c_uint64(source), ctypes.c_size_t(nbytes))

    def _free(self, pointer: int) -> None:
        if self.cuda is None:
            _libc.free(pointer)
        else:
            self.cuda.entry("cuMemFree")(ctypes.c_uint64(pointer))


def module_images():
    """registry/device/module_images.py (stdlib only), loaded by its path: this
    worker runs with -S and no PYTHONPATH, so the registry package is not importable."""
    found = sys.modules.get("module_images")
    if found is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "device", "module_images.py")
        spec = importlib.util.spec_from_file_location("module_images", path)
        found = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(found)
        sys.modules["module_images"] = found
    return found


_libc = ctypes.CDLL(None)
_libc.malloc.restype, _libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_INT64_POINTER = ctypes.POINTER(ctypes.c_int64)
_EMPTY_DIMS = (ctypes.c_int64 * 1)()
SPIN_READS = 200  # non-blocking reads after a reply before a blocking wait: the next call often follows at once
CUDA_SPIN_SECONDS = 0.002  # on CUDA, then this long by the clock
# The ring loop's spin on the channel before it sleeps on the futex: a loop's
# next call comes within a few microseconds of the reply (the caller's Python);
# an idle worker burns at most this much once.
RING_SPIN_NS = 100_000
FINISH_SPIN_SECONDS = 0.02  # how long a launch is polled before a blocking wait (Cuda.finish)
CUDA_ERROR_NOT_READY = 600
_FD_SPACE = socket.CMSG_SPACE(4 * struct.calcsize("i"))  # a message carries at most 4 fds


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C in a terminal reaches both
    try:  # die with the parent, however it ends
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    sock = socket.socket(fileno=int(sys.argv[1]))
    Worker(sock).serve()


if __name__ == "__main__":
    main()
