"""Everything this process has loaded, owned by one object, and what each
`get` reported (Status, what registry.status returns; KernelState, a loaded
kernel as the hot path finds it).

A loaded library, a registered binding or a pinned cache entry lives as long
as the process (an old op handle, or a graph torch.compile traced, may still
call its code), so none of it is ever dropped; keeping it in one place makes
that rule visible and gives tests one thing to look at.

    kernels       (name, backend) -> KernelState: op handles, stamps, status (below)
    requests      (name, device as asked: None, "cpu", "cuda") -> the state it resolved to,
                  so the hot path of `get` finds it in one dict lookup. "No device" and
                  the device it means must find the same state, or one kernel gets two
                  handles and the one not asked for again runs old code: keep() moves
                  every way of asking that resolved to a backend to its new state.
    libraries     kernel-lib key -> the dlopen'ed library (ctypes.CDLL)
    modules       module key -> a hand-written pybind module
    namespaces    op namespace (kreg_<hash>, registered at run time) or shared
                  binding module -> the shared binding's file. Registering a
                  namespace twice fails, so one registered here is never again.
    bindings      shared binding module -> load.SharedBinding (core/codegen.h)
    fast_entries  op namespace -> the shared binding's fast entry (core/fast_entry.h)
    pins          _core.PinSet: the cache entries loaded (cache gc leaves them alone)
    retired_tables   launcher tables an Op handle used before a swap (op.py): a graph
                     compiled earlier may still pass their address
    torch_libraries  namespace -> torch.library.Library (torch_ops.py), kept alive
    torch_handles    (namespace, op) -> backend -> Op behind torch.ops.<namespace>.<op>
    torch_owners     (namespace, op) -> the kernel that defined it (torch_ops.py)
    torch_autograd   (namespace, op) -> "manifest" | "python": the torch.ops ops with an Autograd kernel (torch_ops.py)
    faked_namespaces, fakes_by_table   the Meta kernels of bindings (load.py, torch_ops.py)
    device_modules   (cubin key, device) -> CUmodule (driver_module.py)
    device_images    cubin key -> its bytes, kept for the launcher libraries
"""
from __future__ import annotations

import sys
import threading
import time

from registry import _core


def duration_text(seconds: float) -> str:
    """One rule for every duration the registry shows: ms below a second, s
    from a second on, to about three significant digits."""
    ms = seconds * 1e3
    if ms < 999.5:  # what would round to "1000 ms" is "1.00 s"
        return f"{ms:.3f} ms" if ms < 1 else f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s" if seconds < 100 else f"{seconds:.0f} s"


# Plain classes, not dataclasses: generating a dataclass costs ~2 ms at
# import, and this module is on the path of a fresh process's first `get`.
class Status:
    """What the last `get` of a kernel did, and why.

    outcome             "compiled", "cache" (loaded from disk), "remote" (fetched
                        from the team's remote cache, nothing compiled) or "in-process"
    key                 the kernel library's content key
    artifacts           what -> path of each loaded file
    build_seconds       compile time of this get (0 on a hit)
    last_build_seconds  how long the current kernel library took to build
    changes             why the key differs from the previous build's
    compiled            which artifacts this get compiled
    notes               rejected cache entries, includes that resolved nowhere
    ccache              (hits, misses) during this get's builds, when it built
    ccache_remote       (hits, misses) of ccache's remote storage during those builds
    sources             what -> "cache", "remote" or "compiled", per artifact
    remote              the remote cache's part, when one is configured: where,
                        mode, and this get's hit / miss / rejected / stored counts
    device              compiler = "nvrtc" / "nvcc-cubin": which NVRTC or nvcc compiled the device code, and the cubin's key
    tuned               a kernel with a [tune] table: the tuned table in use and its winners,
                        or "stale" (tuned for other code: the default config runs), or "not tuned"
    """

    def __init__(self, *, kernel, backend, outcome, key, manifest, artifacts, build_seconds,
                 last_build_seconds, built_at, changes, compiled, notes=(), ccache=None,
                 sources=None, remote=None, device=None, tuned=None):
        self.kernel, self.backend, self.outcome, self.key = kernel, backend, outcome, key
        self.manifest, self.artifacts = manifest, artifacts
        self.build_seconds, self.last_build_seconds, self.built_at = build_seconds, last_build_seconds, built_at
        self.changes, self.compiled, self.notes = list(changes), list(compiled), list(notes)
        self.ccache = tuple(ccache[:2]) if ccache is not None else None
        self.ccache_remote = tuple(ccache[2:]) if ccache is not None and len(ccache) > 2 else None
        self.sources, self.remote = dict(sources or {}), remote
        self.device, self.tuned = device, tuned
        self.get_seconds = 0.0

    def __str__(self) -> str:
        folder = self.manifest.rsplit("/", 2)[-2] if self.manifest.count("/") >= 2 else self.kernel
        lines = [
            f"kernel {self.kernel}{f' (folder {folder})' if folder != self.kernel else ''} [{self.backend}]"
            f"  key {self.key}",
            f"  last get: {self.outcome} in {duration_text(self.get_seconds)}"
            + (f", compiled {', '.join(self.compiled)} in {duration_text(self.build_seconds)}"
               if self.compiled and self.outcome == "compiled" else ""),
            f"  built {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.built_at))}"
            f" in {duration_text(self.last_build_seconds)}",
            f"  manifest {self.manifest}",
            *(f"  {what}: {path}" for what, path in self.artifacts.items()),
        ]
        if self.device is not None:
            lines.append(f"  device code: {self.device}")
        if self.tuned is not None:
            lines.append(f"  tuned table: {self.tuned}")
        supervisor = sys.modules.get("registry.isolation.supervisor")  # only once an isolated op was made
        if supervisor is not None:
            lines += supervisor.status_lines(self.kernel, self.backend)
        if self.ccache is not None:
            lines.append(f"  ccache: {self.ccache[0]} hits, {self.ccache[1]} misses"
                         + (f" (remote storage: {self.ccache_remote[0]} hits, {self.ccache_remote[1]} misses)"
                            if self.ccache_remote else ""))
        if self.remote is not None:
            r = self.remote
            lines.append(f"  remote cache {r['where']} ({r['mode']}): {r['hit']} hits, {r['miss']} misses"
                         + (f", {r['rejected']} rejected" if r["rejected"] else "")
                         + (f", {r['stored']} stored" if r["stored"] else "")
                         + (f"; from the remote: {', '.join(w for w, s in self.sources.items() if s == 'remote')}"
                            if "remote" in self.sources.values() else ""))
        lines += ["  changed since the previous build:"] + [f"    {c}" for c in self.changes or ["nothing"]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__

    def served_in_process(self) -> "Status":
        """The status of a later get that found nothing changed: the same
        library and key, and nothing compiled, rejected or changed by it."""
        return Status(kernel=self.kernel, backend=self.backend, outcome="in-process", key=self.key,
                      manifest=self.manifest, artifacts=self.artifacts, build_seconds=0.0,
                      last_build_seconds=self.last_build_seconds, built_at=self.built_at,
                      changes=(), compiled=(), device=self.device, tuned=self.tuned)


class KernelState:
    """A kernel loaded in this process: its op handles and what they depend on.

    status is what the last get did; in_process, made once here, is what
    every get served by the hot path reports (so that path allocates nothing).
    """

    __slots__ = ("name", "backend", "ops", "stamps", "status", "in_process", "handle")

    def __init__(self, name: str, backend: str, ops: dict, stamps, status: Status):
        # stamps: a _core.StampSet over every file the build depends on
        self.name, self.backend, self.ops, self.stamps, self.status = name, backend, ops, stamps, status
        self.in_process = status.served_in_process()
        self.handle = None  # what get returns (the Op, or an OpGroup of several)


class _Redefined:
    """The stamps of a state whose manifest changed in memory: never unchanged."""

    @staticmethod
    def unchanged() -> bool:
        return False


_REDEFINED = _Redefined()


class ProcessState:
    def __init__(self):
        self.kernels: dict = {}
        self.requests: dict = {}
        self.libraries: dict[str, object] = {}
        self.modules: dict[str, object] = {}
        self.namespaces: dict[str, str] = {}
        self.bindings: dict[str, object] = {}
        self.fast_entries: dict[str, object] = {}
        self.pins = _core.PinSet()
        self.retired_tables: list = []
        self.torch_libraries: dict[str, object] = {}
        self.torch_handles: dict = {}
        self.torch_autograd: dict = {}
        self.torch_owners: dict = {}
        self.faked_namespaces: set[str] = set()
        self.fakes_by_table: dict[int, object] = {}
        self.device_modules: dict[tuple[str, int], int] = {}
        self.device_images: dict[str, bytes] = {}
        self.lock = threading.RLock()  # one slow-path get at a time

    def find(self, name: str, requested: str | None):
        """The kernel's state for the device as asked, or None."""
        return self.requests.get((name, requested))

    def keep(self, state, requested: str | None, asked: str | None = None) -> None:
        """asked: the name the get used, when it is the kernel's folder's rather than its own."""
        self.kernels[(state.name, state.backend)] = state
        # Every way of asking that resolved to this backend (by either name) now finds the new state.
        for key, before in self.requests.items():
            if before.name == state.name and before.backend == state.backend:
                self.requests[key] = state
        self.requests[(state.name, requested)] = self.requests[(state.name, state.backend)] = state
        if asked is not None and asked != state.name:
            self.requests[(asked, requested)] = self.requests[(asked, state.backend)] = state

    def redefined(self, kernel: str) -> None:
        """Kernel `kernel`'s manifest changed with no file of it moving (a
        notebook cell's, held in memory by the core): the hot path, which
        asks the files only, must not serve its loaded state again; the next
        get resolves, and its key compares the manifest's text."""
        for state in self.kernels.values():
            if state.name == kernel:
                state.stamps = _REDEFINED

    def kernel_asked_as(self, asked: str) -> str:
        """The kernel's name a get under `asked` (its folder's name) loaded; else `asked`."""
        for (name, _), state in self.requests.items():
            if name == asked:
                return state.name
        return asked

    def torch_namespace(self, kernel: str, op: str) -> str:
        """The torch.ops namespace of a kernel's op: the manifest's `namespace`,
        which defaults to the kernel's name."""
        for (namespace, name), owner in self.torch_owners.items():
            if owner == kernel and name == op:
                return namespace
        return kernel


STATE = ProcessState()
