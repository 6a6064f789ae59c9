"""IsolatedOp: an op handle whose launcher runs in a worker process.

It is an Op (registry/op.py) calling the SAME generated binding through the
same code (argument binding, defaults, keyword-only arguments, the fast
entry, the dispatcher's op, autograd), with its own launcher table: a proxy
copy of its source op's table (proxy.py). So checks, messages, output
allocation, in-place writes, Tensor? and streams are the normal op's by
construction; only the launcher call crosses into the worker.

It follows its source op: when the source handle swaps to a new build (a
get, a watcher, a rebuild) the next call copies the new table, so an
isolated op hot-reloads too. Before each call the CPU tensors of a page or
more among the arguments move into shared memory (once per storage, in
place) so the worker reads and writes them without a copy; smaller ones are
staged (copied into a shared buffer and back).
"""
from __future__ import annotations

import os

import torch

from registry.isolation import cpu_memory, proxy
from registry.isolation.faults import KernelFault
from registry.isolation.interrupts import WATCH
from registry.isolation.supervisor import SUPERVISOR
from registry.op import Op
from registry.state import STATE

_Tensor = torch.Tensor
_PAGE = os.sysconf("SC_PAGESIZE")
_twins: dict[tuple[int, str], "IsolatedOp"] = {}  # (id of the source op, flavor) -> its isolated twin


def twin_of(source: Op, flavor: str = "plain", artifacts: dict | None = None) -> "IsolatedOp":
    twin = _twins.get((id(source), flavor))
    if twin is None or twin._source is not source:
        twin = _twins[(id(source), flavor)] = IsolatedOp(source, flavor, artifacts)
    return twin


class IsolatedOp(Op):
    __slots__ = ("_source", "_mirrored", "_flavor", "_proxy", "_artifacts")

    def __init__(self, source: Op, flavor: str, artifacts: dict | None = None):
        """artifacts: the files of the build `source` runs (Status.artifacts),
        for an op of a build that is not its kernel's current one (a config
        registry.tune checks); by default the kernel's current build."""
        super().__init__(source.kernel, source.name, source.signature, list(source._arg_names), source._spec)
        self._source, self._mirrored, self._flavor, self._proxy = source, None, flavor, None
        self._artifacts = artifacts

    @property
    def isolated(self) -> str:
        return self._flavor

    def _follow(self) -> None:
        source = self._source
        if source._table is self._mirrored and self._proxy is not None:
            return
        if source._removed:
            self._remove(source._removed)
            self._proxy, self._mirrored = "removed", source._table
            return
        if source._table is None:
            from registry.errors import OpCallError

            raise OpCallError(f"{source.kernel}.{source.name} is a hand-written pybind module's function, which "
                              f"cannot run in an isolated worker (its launcher is not the registry's C ABI). "
                              f"Declare the op in kernel.toml with the generated binding, or call it without "
                              f"isolate=True.")
        artifacts = self._artifacts
        if artifacts is None:
            state = STATE.kernels.get((source.kernel, source.backend))
            artifacts = state.status.artifacts if state is not None else {}
        cubin = artifacts.get("device code (cubin)", "")
        library = artifacts.get("kernel library", "")
        ordinal = torch.cuda.current_device() if source.backend == "cuda" else 0
        launchers = None
        if self._flavor != "plain":  # the checked variant of this version (checked.py), built on first use
            from registry.isolation import checked

            built = checked.variant(source.kernel, source.backend, source.key)
            launchers, cubin = built.launchers[source.name], built.cubin
        table = proxy.ProxyTable(source._table, source._spec, source.kernel, source.name, source.backend,
                                 self._flavor, launchers=launchers, cubin=cubin, ordinal=ordinal, library=library)
        self._adopt(table, source)

    def _adopt(self, table, source: Op) -> None:
        self._swap(source._fn, table, source.backend, source.key, source.signature, list(source._arg_names),
                   fast=source._fast_entry)
        self._set_spec(source._spec)
        fake = STATE.fakes_by_table.get(source._table.address) if source._table is not None else None
        if fake is not None:
            STATE.fakes_by_table[table.address] = fake  # torch.compile's Meta kernel finds the op by table
        self._proxy, self._mirrored = table, source._table
        self._backward = twin_of(source._backward, self._flavor) if source._backward is not None else None

    def __call__(self, *args, **kwargs):
        return self._run(args, kwargs, None)

    def call(self, *args, timeout: float | None = None, **kwargs):
        """Like calling the op; timeout: seconds before the worker is killed
        (default REGISTRY_ISOLATE_TIMEOUT)."""
        return self._run(args, kwargs, timeout)

    def _call_raw(self, args: tuple):
        # autograd's forward and backward come here (registry/autograd.py)
        return self._run(args, {}, None, raw=True)

    def _run(self, args: tuple, kwargs: dict, timeout: float | None, raw: bool = False):
        # Every call's path: what it adds to the normal op's (the lock, the
        # bookkeeping a slow phase reads, the CPU's size test per tensor) is
        # ~2 us on 2 cores (bench/results/isolated_percall-cpu-2026-12-05.md);
        # the C++ call channel does the rest.
        if self._source._table is not self._mirrored or self._proxy is None:
            self._follow()
        call = proxy.CALL
        with SUPERVISOR.lock:
            outer = call.timeout
            # The outermost call sets the timeout; autograd's forward, run inside it, keeps it.
            if timeout is not None or call.depth == 0:
                call.timeout = timeout  # None: REGISTRY_ISOLATE_TIMEOUT, read only where a call waits
            call.depth += 1
            call.outcome = None
            WATCH.held += 1  # a slow phase of this call leaves SIGINT recorded until it ends (interrupts.py)
            try:
                if self.backend == "cpu":
                    self._share_arguments(args, kwargs)
                result = Op._call_raw(self, args) if raw else Op.__call__(self, *args, **kwargs)
            except KernelFault:
                raise
            except RuntimeError as error:
                failure = self._failure(error)
                if failure is error:
                    raise
                raise failure from None
            finally:
                call.depth -= 1
                call.timeout = outer
                WATCH.held -= 1
                interrupted = not WATCH.held and (WATCH.previous is not None or WATCH.seen) and WATCH.disarm()
            if interrupted:  # a Ctrl-C during the call whose KeyboardInterrupt something dropped
                raise KeyboardInterrupt
            return result

    def _share_arguments(self, args: tuple, kwargs: dict) -> None:
        """Moves the CPU tensors of a page or more into shared memory before
        the call (their storages, in place, once each), so the worker reads
        and writes them without a copy, between guard pages that also catch
        a read past the end. Smaller ones are staged by the call (copied to
        a shared buffer and back): a copy costs them less than sharing a
        fresh tensor (an fd sent to the worker), and the test that skips them
        costs ~0.1 us, where checking a storage costs ~0.7 us."""
        worker = None
        for value in (*args, *kwargs.values()) if kwargs else args:
            if (type(value) is _Tensor or isinstance(value, _Tensor)) and value.nbytes >= _PAGE:
                if worker is None:
                    worker = SUPERVISOR.worker(self._flavor, "cpu")
                cpu_memory.share_storage(worker, value.untyped_storage())
        if worker is not None and worker.channel is not None and not worker.channel.in_ring:
            worker.enter_ring()  # a storage just sent: the call itself can still skip Python

    def _failure(self, error: RuntimeError) -> BaseException:
        """What the call raises for the binding's RuntimeError: the fault, the
        interrupt or the isolation's error the launcher callback recorded, else
        the error itself."""
        outcome, proxy.CALL.outcome = proxy.CALL.outcome, None
        if outcome is None:
            if WATCH.seen:  # SIGINT at the launcher callback's entry: dropped there, not sent
                return KeyboardInterrupt()
            if proxy.FAULT_TEXT.value.decode() in str(error):
                # A callback failed before it could record why: only an exception at its
                # first line (a KeyboardInterrupt Python dropped there) does that.
                return KeyboardInterrupt()
            return error
        if isinstance(outcome, proxy.Fault):
            return self._fault(outcome)
        return outcome  # KeyboardInterrupt, or an error of the isolation itself

    def _fault(self, fault: "proxy.Fault") -> KernelFault:
        if self._flavor != "plain":
            from registry.isolation import sanitizer_report

            return sanitizer_report.fault(self, fault)
        return KernelFault(kernel=self.kernel, op=self.name, dtype=fault.dtype, backend=self.backend,
                           what=fault.what, hang=fault.hang, log=fault.log)

    def snapshot(self) -> "IsolatedOp":
        self._follow()
        frozen = IsolatedOp(self._source.snapshot(), self._flavor, self._artifacts)
        return frozen

    def __repr__(self) -> str:
        return Op.__repr__(self)[:-1] + f", isolated{'' if self._flavor == 'plain' else ', checked'}]>"


_groups: dict = {}  # (id of the source OpGroup, flavor) -> the group of twins


def isolated(handle, flavor: str = "plain", artifacts: dict | None = None):
    """The isolated twin of an Op (or an OpGroup of twins), following it.
    artifacts: see IsolatedOp (an Op only)."""
    from registry.op import OpGroup

    if isinstance(handle, Op):
        twin = twin_of(handle, flavor, artifacts)
        twin._follow()
        return twin
    group = _groups.get((id(handle), flavor))
    if group is None:
        group = _groups[(id(handle), flavor)] = OpGroup(handle.kernel, {n: isolated(o, flavor) for n, o in handle.ops.items()})
    for op in group.ops.values():
        op._follow()
    return group
