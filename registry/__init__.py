"""A JIT kernel registry for notebooks.

    import registry
    axpy = registry.get("axpy")      # build or load, return a ready op
    out = axpy(x, y, 1.5)
    registry.status("axpy")          # key, hit or build, what changed

The public functions are here: get, list, status. `get` has two paths. The
hot one (below): the kernel was loaded in this process and every file it
depends on has the stat it had, so the op handle is returned after a few
stat() calls and nothing else. The slow one (resolve.resolve): keys, cache,
builds, loading. See README.md and ARCHITECTURE.md.
"""
from __future__ import annotations

try:
    from registry import _core
except ImportError as error:  # pragma: no cover - a checkout without the built core
    raise ImportError(
        "registry's C++ core (registry/_core) is not built for this Python. "
        "Install the package (`./dev deps` in a checkout, or `pip install .`; see README.md)."
    ) from error

from time import perf_counter

from registry import knobs
from registry.knobs import ENVIRON_DATA as _ENVIRON_DATA, ISOLATE_KEY as _ISOLATE_KEY
from registry.op import Op, OpGroup
from registry.state import STATE  # the loaded kernels, by (name, backend), and what each request resolved to

__all__ = [
    "get", "list", "status", "Op", "OpGroup", "KernelInfo",
    "RegistryError", "BuildError", "KernelNotFoundError", "LockTimeoutError", "ManifestError",
    "sweep", "tune", "watch", "KernelFault", "register_autograd",
]


def get(name: str, *, rebuild: bool = False, device: str | None = None, isolate: bool | None = None,
        checked: bool = False) -> Op | OpGroup:
    """The ready op of kernel `name` (an OpGroup when it has several ops).

    Builds on first use, reuses the cache when nothing changed, rebuilds and
    hot-swaps when any source, header, flag, compiler or version changed, and
    returns at once when you go back to content that was built before.
    `rebuild=True` compiles the kernel again even if nothing changed.
    `device` picks the backend ("cpu" or "cuda"); by default CUDA when
    available and the kernel has a [cuda] section.
    `isolate=True` (default: REGISTRY_ISOLATE) returns ops whose launcher runs
    in a worker process: a crash, a device fault or a hang raises KernelFault
    and the process keeps working. `checked=True` (implies isolate) builds a
    variant with sanitizers (CPU: ASan + UBSan; CUDA: line info, run under
    compute-sanitizer) whose faults name the kernel source's file:line.
    """
    if checked or isolate or (isolate is None and _ISOLATE_KEY in _ENVIRON_DATA and knobs.isolate()):
        from registry.isolation.entry import get_isolated

        return get_isolated(get, name, rebuild=rebuild, device=device, checked=checked)
    start = perf_counter()
    requested = knobs.requested_device(device)
    # Everything per call is here, on purpose: one dict lookup, one C++ call
    # (a plain CPython method: a stat() per file the build read, the floor
    # for an exact answer), and no object made beyond the key and the time.
    state = STATE.requests.get((name, requested))
    if state is not None and not rebuild and state.stamps.unchanged():
        # status() now describes this get, not the build or load before it.
        state.status = served = state.in_process
        served.get_seconds = perf_counter() - start
        return state.handle
    from registry.resolve import resolve

    with STATE.lock:
        # previous_of is asked with the kernel's name: `name` may be its folder's.
        state = resolve(name, requested, rebuild, lambda backend, kernel: STATE.kernels.get((kernel, backend)))
        state.status.get_seconds = perf_counter() - start
        state.handle = _handle(state)
        STATE.keep(state, requested, asked=name)
        return state.handle


def _handle(state) -> Op | OpGroup:
    """The op, or for several ops their group: made once per load, so the
    hot path returns the same object without building it again."""
    if len(state.ops) == 1:
        return next(iter(state.ops.values()))
    return OpGroup(state.name, state.ops)


def status(name: str, *, device: str | None = None):
    """What the last `get` of `name` in this process did: key, hit or build,
    paths, build time, and what changed since the previous build."""
    requested = knobs.requested_device(device)
    name = STATE.kernel_asked_as(name)
    state = STATE.find(name, requested)
    if state is None and requested is None:
        state = _loaded_for_any_device(name)
    if state is None:
        from registry.errors import NotLoadedError

        raise NotLoadedError(f"kernel {name!r} has not been loaded in this process; call registry.get({name!r}) first")
    return state.status


def _loaded_for_any_device(name: str):
    """status(name) with no device asked: the kernel as loaded for whichever
    device a get named; with both loaded, the one a plain get(name) picks."""
    loaded = {backend: state for (kernel, backend), state in STATE.kernels.items() if kernel == name}
    if len(loaded) <= 1:
        return next(iter(loaded.values()), None)
    from registry import environment

    return loaded[environment.backend_for(None)]


class KernelInfo:
    """One entry of registry.list(): a kernel, or a folder holding a
    kernel.toml that cannot be one (`problem` says why; `name` is then the
    name it would have had, or its folder's)."""

    __slots__ = ("name", "manifest", "loaded", "folder", "problem")

    def __init__(self, name: str, manifest: str, loaded: bool, folder: str = "", problem: str = ""):
        self.name, self.manifest, self.loaded = name, manifest, loaded
        self.folder, self.problem = folder or name, problem

    def __repr__(self) -> str:
        if self.problem:
            return f"KernelInfo({self.name!r}, problem={self.problem!r})"
        return f"KernelInfo({self.name!r}, loaded={self.loaded})"

    def __str__(self) -> str:
        if self.problem:
            return f"{self.folder}/ is not a kernel: {self.problem}  {self.manifest}"
        folder = f" (folder {self.folder})" if self.folder != self.name else ""
        return f"{self.name}{folder}{' (loaded)' if self.loaded else ''}  {self.manifest}"


def list() -> list[KernelInfo]:  # noqa: A001  (the name the notebook API promises)
    """Every kernel the registry can find (this process's %%kernel cells
    first, their manifest "%%kernel NAME"), and whether it is loaded here;
    then each folder holding a kernel.toml that cannot be a kernel, with why."""
    loaded = {name for name, _ in STATE.kernels}
    roots = [str(r) for r in knobs.kernel_roots()]
    found = _core.discover(roots)
    cells = _core.inline_kernel_names()  # %%kernel cells, held in memory: they shadow a folder of their name
    kernels = [KernelInfo(name, f"%%kernel {name}", name in loaded) for name in cells]
    kernels += [KernelInfo(k.name, k.manifest, k.name in loaded, k.folder) for k in found.kernels if k.name not in cells]
    import os

    return kernels + [KernelInfo(u.name or os.path.basename(u.dir), os.path.join(u.dir, "kernel.toml"), False,
                                 os.path.basename(u.dir), u.reason) for u in found.unusable]


# The rest loads on first use, so `import registry` stays a few milliseconds
# (each module a fresh process imports costs it ~0.1-0.2 ms).
_LAZY = {
    "RegistryError": "registry.errors", "BuildError": "registry.errors",
    "KernelNotFoundError": "registry.errors", "LockTimeoutError": "registry.errors",
    "ManifestError": "registry.errors",
    "sweep": "registry.notebook.dtype_sweep", "tune": "registry.tuning.search", "watch": "registry.notebook.watcher",
    "KernelFault": "registry.isolation.faults", "register_autograd": "registry.torch_ops",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'registry' has no attribute {name!r}")
