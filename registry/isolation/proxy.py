"""Proxy launcher tables: the binding's table with each launcher replaced by
a function of the same C prototype that forwards the call to a worker.

A table (kreg/launcher_table.h; mirrored below, checked by its magic) is
copied byte for byte: the binding reads the same checks, dtypes and output
declarations from it, so everything the binding does before and after the
launcher is the normal op's. Two things differ. launchers[]: per dtype slot
a ctypes callback built from the signature's argument kinds, which
translates each kreg_tensor's data pointer into memory the worker maps
(supervisor.Worker: CPU shared storages, the shared output pool's segments,
the staging buffer, CUDA IPC), sends the call and returns the worker's
reply as the launcher's result. And on the CPU the output hooks: the
binding takes large outputs from the shared output pool
(core/shared_output_pool.h), so the worker writes them in place.

A plain op's table (CPU; CUDA unless REGISTRY_ISOLATE_CUDA_CHANNEL=0) goes
one step further (core/isolated_call.h): its entry is the core's kreg_isolated_entry and each launchers[] slot an
IsolatedSlot, so a call whose memory the worker already maps is written
into the worker's call channel by C++ and never enters Python; the ctypes
callback above is the slot's fallback for everything else (called through
the kernel library's own entry), and Link.slow is the slot's way back into
Python to wait past the spin or to report a fault.

A callback cannot raise through C: a fault, a timeout or Ctrl-C is recorded
in CALL and the callback returns FAULT_TEXT, which the binding raises as a
RuntimeError; the handle (handle.py) turns it into KernelFault.
"""
from __future__ import annotations

import ctypes
import os
import struct

from registry import _core, dtypes, knobs
from registry.isolation import cpu_memory, guards, wire
from registry.isolation.supervisor import SUPERVISOR, WorkerDied, WorkerTimeout

# The table's limits, magic and dtype table are the core's (kreg/launcher_table.h,
# core/dtype.h), read from _core; the Structures below mirror the layout, and
# tests/test_table_layout.py compares them field by field with the compiler's.
_LIMITS = _core.table_layout()["limits"]
MAX_ARGS, MAX_OUTPUTS, MAX_OUTPUT_DIMS, DTYPE_SLOTS = (_LIMITS["max_args"], _LIMITS["max_outputs"],
                                                        _LIMITS["max_output_dims"], _LIMITS["dtype_slots"])
TABLE_MAGIC = _LIMITS["magic"]
DTYPE_NAMES = dtypes.NAMES  # by code
ITEM_SIZES = dtypes.ELEMENT_SIZES  # bytes per element, by code


class _DimTerm(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("arg", ctypes.c_int32), ("a", ctypes.c_int64), ("b", ctypes.c_int64)]


class _OutputDecl(ctypes.Structure):
    _fields_ = [("dtype_code", ctypes.c_int32), ("dtype_arg", ctypes.c_int32), ("ndims", ctypes.c_int32),
                ("unused", ctypes.c_int32), ("dims", _DimTerm * MAX_OUTPUT_DIMS)]


class LauncherTable(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_uint64), ("op_name", ctypes.c_char_p), ("dtypes", ctypes.c_char_p),
                ("same_shape_mask", ctypes.c_uint64), ("arg_dtypes", ctypes.c_int32 * MAX_ARGS),
                ("outputs", _OutputDecl * MAX_OUTPUTS), ("launchers", ctypes.c_void_p * DTYPE_SLOTS),
                ("route_count", ctypes.c_int64), ("routes", ctypes.c_void_p),
                ("shared_output_allocate", ctypes.c_void_p), ("shared_output_release", ctypes.c_void_p),
                # The op's signature and entry: copied as they are (the entry calls the proxy's launchers).
                ("entry", ctypes.c_void_p), ("arg_count", ctypes.c_int32), ("return_count", ctypes.c_int32),
                ("first_tensor", ctypes.c_int32), ("output_padding", ctypes.c_int32), ("mutated_mask", ctypes.c_uint64),
                ("arg_kinds", ctypes.c_char * MAX_ARGS), ("arg_names", ctypes.c_char_p * MAX_ARGS)]


# What a faulted call's launcher "returns": the binding raises it as a
# RuntimeError, which the handle replaces by the KernelFault recorded in CALL.
FAULT_TEXT = ctypes.create_string_buffer(b"the isolated worker faulted (the op raises registry.KernelFault)")
_FAULT_ADDRESS = ctypes.addressof(FAULT_TEXT)


class CallState:
    """The isolated call in flight (calls are serialized by SUPERVISOR.lock)."""

    timeout = None  # seconds, or None: REGISTRY_ISOLATE_TIMEOUT (read when a call waits, see wait_limit)
    outcome = None  # a Fault or a BaseException the callback caught
    depth = 0  # isolated calls in progress on this thread (autograd's forward runs inside one)


CALL = CallState()


def wait_limit() -> float:
    """The seconds the call in flight may take."""
    if CALL.timeout is not None:
        return CALL.timeout
    from registry import knobs

    return knobs.isolate_timeout()


class Fault(Exception):
    """What ended a call in the worker: how (readable), the worker's log, and whether it was a hang."""

    def __init__(self, what: str, log: str = "", dtype: str = "", hang: bool = False, cuda: bool = False):
        super().__init__(what)
        self.what, self.log, self.dtype, self.hang, self.cuda = what, log, dtype, hang, cuda


class Dl_info(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_libc = ctypes.CDLL(None)
_libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(Dl_info)]


def symbol_of(address: int) -> tuple[str, str]:
    """(library path, exported symbol) of a launcher address."""
    info = Dl_info()
    if not _libc.dladdr(address, ctypes.byref(info)) or not info.dli_sname:
        raise RuntimeError(f"the launcher at {address:#x} is not an exported symbol of a loaded library")
    return info.dli_fname.decode(), info.dli_sname.decode()


def kinds_of(spec) -> str:
    """The launcher's parameters as wire.py KINDS letters: each return, then each argument."""
    return "T" * len(spec.signature.returns) + "".join(wire.KIND_OF_TYPE[a.type_name] for a in spec.signature.args)


class ProxyTable:
    """A copy of `source` (a _core.LauncherTable) whose launchers forward to a
    worker. .address is what the binding takes; .launches describes each slot."""

    def __init__(self, source_table, spec, kernel: str, op_name: str, backend: str, flavor: str,
                 launchers: dict[int, tuple[str, str]] | None = None, cubin: str = "", ordinal: int = 0,
                 library: str = ""):
        """launchers: dtype code -> (library, symbol) when the source table has no
        addresses to look up (a checked build the parent does not load).
        library: the kernel library's path in the cache, used when the path it
        was loaded from (a build's staging folder) is gone."""
        self.table = LauncherTable.from_buffer_copy(LauncherTable.from_address(source_table.address))
        if self.table.magic != TABLE_MAGIC:
            raise RuntimeError("the launcher table's layout is not the one registry/isolation/proxy.py mirrors")
        # A tuned table's routes name other configs' launchers in this process:
        # an isolated op must never call one of them here, so it runs the default config.
        self.table.route_count, self.table.routes = 0, None
        if backend == "cpu":
            # Large outputs from memory the worker maps (core/shared_output_pool.h):
            # written there in place, not staged and copied back.
            self.table.shared_output_allocate, self.table.shared_output_release = _core.shared_output_hooks()
        self.address = ctypes.addressof(self.table)
        kinds = kinds_of(spec)
        # The call channel's fast path (core/isolated_call.h): the kernel library's
        # entry spreads the values for the fallback, and the worker calls it too.
        channel = backend == "cpu" or knobs.isolate_cuda_channel()
        source_entry = self.table.entry if channel and flavor == "plain" and launchers is None else None
        entry_symbol = symbol_of(source_entry)[1] if source_entry else ""
        self.links = {}
        self._callbacks = []
        for code in range(DTYPE_SLOTS):
            address = self.table.launchers[code]
            if launchers is not None:
                if code not in launchers:
                    continue
                library, symbol = launchers[code]
            elif not address:
                continue
            else:
                loaded_from, symbol = symbol_of(address)
                library = loaded_from if os.path.exists(loaded_from) or not library else library
            # A float64 launcher takes a float argument as double (kreg/abi.h).
            slot_kinds = kinds.replace("f", "d") if DTYPE_NAMES[code] == "float64" else kinds
            prototype = ctypes.CFUNCTYPE(ctypes.c_void_p, *(wire.CTYPE_OF_KIND[k] for k in slot_kinds), ctypes.c_void_p)
            link = Link(kernel, op_name, DTYPE_NAMES[code], backend, flavor, library, symbol, cubin, slot_kinds,
                        _item_sizes(self.table, spec, code), ordinal)
            link.param_names = [r.name or f"output {k}" for k, r in enumerate(spec.signature.returns)] + \
                [a.name for a in spec.signature.args]
            link.roles = ("out",) * len(spec.signature.returns) + tuple(
                "inout" if a.mutated else "in" for a in spec.signature.args)
            callback = prototype(link.forward)
            self._callbacks.append(callback)
            self.links[code] = link
            self.table.launchers[code] = ctypes.cast(callback, ctypes.c_void_p).value
            if source_entry:
                link.entry = entry_symbol
                slow = _SLOW_PATH(link.slow)
                self._callbacks.append(slow)
                roles = "".join({"out": "o", "inout": "m", "in": "i"}[r] for r in link.roles)
                link.slot = _core.IsolatedSlot(self.table.launchers[code], source_entry,
                                               ctypes.cast(slow, ctypes.c_void_p).value, _FAULT_ADDRESS, slot_kinds,
                                               roles, list(link.item_sizes))
                self.table.launchers[code] = link.slot.address
        if source_entry and self.links:
            self.table.entry = _core.isolated_entry()
            if backend == "cuda":
                # Room after each output the binding allocates, for the worker's
                # canaries (a write past an output's end is named, not lost).
                self.table.output_padding = guards.ZONE


def _item_sizes(table: LauncherTable, spec, code: int) -> tuple[int, ...]:
    """Bytes per element of each tensor parameter for the launcher of dtype `code`
    (the binding's rule: a fixed dtype from the manifest, else the dispatch dtype)."""
    def of_arg(i: int) -> int:
        fixed = table.arg_dtypes[i]
        return ITEM_SIZES[fixed if fixed >= 0 else code]

    sizes = []
    for k in range(len(spec.signature.returns)):
        decl = table.outputs[k]
        sizes.append(ITEM_SIZES[decl.dtype_code] if decl.dtype_code >= 0 else of_arg(decl.dtype_arg))
    sizes += [of_arg(i) if a.type_name == "Tensor" else 0 for i, a in enumerate(spec.signature.args)]
    return tuple(sizes)


def _cuda_memory():
    from registry.isolation import cuda_memory  # imported on the first CUDA call, then found in sys.modules

    return cuda_memory


# A slot's way back into Python (core/isolated_call.h's SlowPath): code, the call's values, a, b.
_SLOW_PATH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_SLOW_WAIT, _SLOW_OVERRUN, _SLOW_DEVICE_FAULT = 1, 2, 3
_VALUE_BYTES = ctypes.sizeof(wire.KregTensor)  # a kreg_value (kreg/abi.h): its largest member


class _Scalar:
    """A parameter that is not a tensor, where guards.py reads .numel of tensors only."""

    numel = 0


_Q, _F, _D, _I, _B = (struct.Struct("<q"), struct.Struct("<f"), struct.Struct("<d"), struct.Struct("<i"),
                      struct.Struct("<B"))


class Link:
    """One launcher of one op version, as the worker runs it."""

    def __init__(self, kernel, op_name, dtype, backend, flavor, library, symbol, cubin, kinds, item_sizes, ordinal):
        self.kernel, self.op_name, self.dtype, self.backend, self.flavor = kernel, op_name, dtype, backend, flavor
        self.library, self.symbol, self.cubin, self.kinds = library, symbol, cubin, kinds
        self.item_sizes, self.ordinal = item_sizes, ordinal
        self.error_text = None  # the last launcher error, kept alive while the binding reads it
        # Per parameter: "out" (a return the binding just allocated: a staged one
        # is copied back, not in), "inout" (a Tensor(a!): both ways) or "in" (read
        # only: copied in, not back).
        self.roles = ("inout",) * len(kinds)
        self.param_names = [f"parameter {k}" for k in range(len(kinds))]  # set by ProxyTable
        self.slot = None  # the call channel's slot (core/isolated_call.h), for a plain launcher
        self.entry = ""  # the kernel library's entry symbol, which the worker's ring loop calls

    def slow(self, code, values, a, b):
        """The slot's fast path needs Python: _SLOW_WAIT (no reply within its
        spin: wait for it; 1 when it came), _SLOW_OVERRUN (canary a, side b
        changed) or _SLOW_DEVICE_FAULT (a CUDA worker's context faulted). A
        failure is recorded in CALL for the handle; returns 0."""
        try:
            with SUPERVISOR.lock:  # held already when the call came through the handle
                return self._slow(code, values, a, b)
        except BaseException as error:  # noqa: BLE001  nothing may raise through C; the handle raises it
            CALL.outcome = error
        return 0

    def _slow(self, code, values, a, b):
        worker = None
        params = ()
        try:
            worker = SUPERVISOR.workers.get((self.flavor, self.backend))
            if code == _SLOW_WAIT:
                params = values  # read as parameters only if the call failed
                worker.ring_wait(wait_limit())
                return 1
            if code == _SLOW_DEVICE_FAULT:  # the worker replied F and exits: its context is lost
                reply = worker.channel.reply()
                SUPERVISOR.retire(worker, finishing=True)
                SUPERVISOR.faults += 1
                CALL.outcome = Fault(f"the kernel faulted on the device: {reply[1:].decode(errors='replace')}",
                                     worker.read_log(), self.dtype, cuda=True)
                return 0
            params = self._params_at(values)
            SUPERVISOR.retire(worker)
            SUPERVISOR.faults += 1
            CALL.outcome = Fault(guards.describe(self.param_names, params, a, "after" if b == 0 else "before"),
                                 worker.read_log(), self.dtype)
        except BaseException as error:  # noqa: BLE001  nothing may raise through C; the handle raises it
            try:
                if isinstance(params, int):
                    params = self._params_at(params)
                CALL.outcome = self._failed(worker, error, params, wait_limit())
            except BaseException as outcome:  # noqa: BLE001
                CALL.outcome = outcome
        return 0

    def _params_at(self, values: int) -> list:
        """The call's parameters from its kreg_value array, as guards.py reads them."""
        return [wire.KregTensor.from_address(values + k * _VALUE_BYTES) if kind == "T" else _Scalar()
                for k, kind in enumerate(self.kinds)]

    def _failed(self, worker, error, params, timeout) -> BaseException:
        """What a call that ended in `error` raises; the worker is retired."""
        if worker is not None:
            SUPERVISOR.retire(worker)
        if isinstance(error, WorkerDied):
            SUPERVISOR.faults += 1
            what = guards.from_log(error.log, self.param_names, params) or error.what
            return Fault(what, error.log, self.dtype)
        if isinstance(error, WorkerTimeout):
            SUPERVISOR.faults += 1
            return Fault(f"the call did not return within {timeout:g} s: the worker was killed (an endless loop, "
                         f"a deadlock, or a kernel slower than the timeout; raise REGISTRY_ISOLATE_TIMEOUT or pass "
                         f"timeout= to op.call() if it is only slow)", worker.read_log(), self.dtype, hang=True)
        return error

    def forward(self, *params):
        try:
            with SUPERVISOR.lock:
                return self._forward(params)
        except BaseException as error:  # noqa: BLE001  nothing may raise through C; the handle raises it
            CALL.outcome = error
            return _FAULT_ADDRESS

    def _forward(self, params):
        worker = SUPERVISOR.worker(self.flavor, self.backend, self.ordinal)
        timeout = wait_limit()
        cuda = self.backend == "cuda"
        cuda_memory = None
        try:
            if cuda:
                cuda_memory = _cuda_memory()
                cuda_memory.synchronize(params[-1])  # the parent's stream: what it queued before this call
            launcher = worker.launcher_id(self.library, self.symbol, self.cubin, self.kinds, self.item_sizes, timeout,
                                          self.entry)
            ring = self.slot is not None and worker.channel is not None
            if ring:
                self.slot.bind(worker.channel.generation, launcher)  # the next call takes the fast path
            parts = [wire.CALL_HEAD.pack(b"C", launcher)]
            staged = []  # (address, offset in staging, bytes, ...): copied in before, written ones back after
            staged_bytes = 0
            zones = []  # CPU: canaries around the arguments (guards.py)
            for index, (kind, value, item_size, role) in enumerate(zip(self.kinds, params, self.item_sizes,
                                                                       self.roles)):
                if kind == "T":
                    ndim = value.ndim
                    if ndim < 0:
                        parts.append(wire.NONE_TENSOR)
                        continue
                    data, numel = value.data, value.numel
                    nbytes = numel * item_size
                    if not data or nbytes == 0:
                        region, offset = wire.NO_REGION, 0
                    else:
                        found = cuda_memory.region_of(worker, data) if cuda else (
                            cpu_memory.region_of(worker, data, nbytes)
                            or cpu_memory.pool_region_of(worker, data, nbytes, role == "out"))
                        if found is None:
                            # Not shared memory (CPU: an output the binding allocated; CUDA:
                            # memory IPC cannot share): staged, between two canary zones.
                            # The offset keeps the alignment.
                            offset = staged_bytes + guards.ZONE + (data & 63)
                            staged.append((data, offset, nbytes, len(parts), ndim, numel, role, index))
                            staged_bytes = (offset + nbytes + guards.ZONE + 63) & ~63
                            region = wire.NO_REGION
                        elif cuda:
                            region, offset = found
                            if ring and role == "out":  # padded by the binding (ProxyTable): canaries after it
                                region |= wire.GUARD_AFTER
                            elif ring and role == "inout":  # other data around it: the worker watches it
                                region |= wire.WATCH
                        else:
                            region, offset, free = found
                            if free:
                                zones.append((data + nbytes, min(free, guards.ZONE), index, "after"))
                    parts.append(wire.TENSOR_HEAD.pack(ndim, region, offset, numel))
                    parts.append(struct.pack(f"<{2 * ndim}q", *value.sizes[:ndim], *value.strides[:ndim]))
                elif kind == "f":
                    parts.append(_F.pack(value))
                elif kind == "d":
                    parts.append(_D.pack(value))
                elif kind == "i":
                    parts.append(_Q.pack(value))
                elif kind == "b":
                    parts.append(_B.pack(bool(value)))
                elif kind == "s":
                    parts.append(_I.pack(value))
                else:  # "l"
                    parts.append(struct.pack(f"<q{value.size}q", value.size, *value.data[:value.size]))
            if staged:
                region, base = (cuda_memory.staging_buffer(worker, staged_bytes) if cuda
                                else cpu_memory.staging_buffer(worker, staged_bytes))
                move = cuda_memory.copy if cuda else ctypes.memmove
                for data, offset, nbytes, at, ndim, numel, role, index in staged:
                    if role != "out":
                        move(base + offset, data, nbytes)
                    guarded = wire.GUARD_AFTER | wire.GUARD_BEFORE if cuda and ring else 0  # the worker's canaries
                    parts[at] = wire.TENSOR_HEAD.pack(ndim, region | guarded, offset, numel)
                    if not cuda:
                        zones.append((base + offset - guards.ZONE, guards.ZONE, index, "before"))
                        zones.append((base + offset + nbytes, guards.ZONE, index, "after"))
                worker.staged_calls += 1
                worker.staged_bytes += sum(s[2] for s in staged)
            if zones:
                guards.arm(zones)
            message = b"".join(parts)
            reply = worker.request(message, timeout, ring)
            worker.calls += 1
            overrun = guards.broken(zones) if zones else None
            if overrun is None and reply[:1] != b"G":
                for data, offset, nbytes, _, _, _, role, _ in staged:
                    if role != "in":
                        move(data, base + offset, nbytes)
        except (WorkerDied, WorkerTimeout) as error:
            raise self._failed(worker, error, params, timeout) from None
        except BaseException:
            SUPERVISOR.retire(worker)
            raise
        if overrun is not None:
            # Nothing is copied back: the caller's tensors keep what they held.
            SUPERVISOR.retire(worker)
            SUPERVISOR.faults += 1
            raise Fault(guards.describe(self.param_names, params, *overrun), worker.read_log(), self.dtype)
        if worker.flavor == "memcheck":
            # memcheck may report an access and let the kernel finish: its report in
            # the log, not the reply, says whether the call was clean.
            report = worker.read_new_log()
            if "========= Invalid" in report or "========= Program hit" in report or "Misaligned" in report:
                SUPERVISOR.retire(worker)
                SUPERVISOR.faults += 1
                raise Fault("compute-sanitizer's memcheck found an invalid access", worker.read_log(), self.dtype,
                            cuda=True)
        if reply[:1] == b"K":
            return None
        if reply[:1] == b"G":  # a CUDA worker's canary changed: nothing was copied back
            SUPERVISOR.retire(worker)
            SUPERVISOR.faults += 1
            raise Fault(guards.from_reply(reply, self.param_names, params), worker.read_log(), self.dtype)
        if reply[:1] == b"F":
            SUPERVISOR.retire(worker, finishing=True)
            SUPERVISOR.faults += 1
            raise Fault(f"the kernel faulted on the device: {reply[1:].decode(errors='replace')}", worker.read_log(),
                        self.dtype, cuda=True)
        self.error_text = ctypes.create_string_buffer(reply[1:])
        return ctypes.addressof(self.error_text)
