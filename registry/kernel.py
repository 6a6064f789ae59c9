"""Resolving a kernel name to loaded, ready ops: the slow path of `get`.

  manifest -> backend -> environment -> keys (memo fast path, or scan + hash)
  -> artifacts (cache hit, or lock/build/publish, in parallel)
  -> load (dlopen the kernel library, register the binding once per process)
  -> swap the launcher tables of the op handles -> write the memo

Nothing here runs when `get` finds its stamps unchanged (see api.py).
"""
from __future__ import annotations

import time
from pathlib import Path

from registry import _core, ccache, environment, keys, knobs, pins, torch_ops
from registry.errors import KernelNotFoundError, RegistryError
from registry.launchers import build_table, open_library
from registry.op import Op, link_backwards

# The build machinery (builder, artifacts, ThreadPoolExecutor) is imported only
# when something must be built: a fresh process that finds everything cached
# should not pay for it.

# Loaded in this process, by key; never unloaded (an old handle may still run).
_libraries: dict[str, object] = {}
_modules: dict[str, object] = {}
# Bindings registered in this process: namespace -> the file it came from.
# Loading a second file that registers the same TORCH_LIBRARY namespace aborts
# the process, so a namespace registered here is never built or loaded again
# (even if the cache was emptied or moved meanwhile).
_namespaces: dict[str, str] = {}


# Plain classes, not dataclasses: generating a dataclass costs ~2 ms at
# import, and this module is on the path of a fresh process's first `get`.
class Status:
    """What the last `get` of a kernel did, and why.

    outcome             "compiled", "cache" (loaded from disk) or "in-process"
    key                 the kernel library's content key
    artifacts           what -> path of each loaded file
    build_seconds       compile time of this get (0 on a hit)
    last_build_seconds  how long the current kernel library took to build
    changes             why the key differs from the previous build's
    compiled            which artifacts this get compiled
    notes               rejected cache entries, includes that resolved nowhere
    ccache              (hits, misses) during this get's builds, when it built
    """

    def __init__(self, *, kernel, backend, outcome, key, manifest, artifacts, build_seconds,
                 last_build_seconds, built_at, changes, compiled, notes=(), ccache=None):
        self.kernel, self.backend, self.outcome, self.key = kernel, backend, outcome, key
        self.manifest, self.artifacts = manifest, artifacts
        self.build_seconds, self.last_build_seconds, self.built_at = build_seconds, last_build_seconds, built_at
        self.changes, self.compiled, self.notes = list(changes), list(compiled), list(notes)
        self.ccache = ccache
        self.get_seconds = 0.0

    def __str__(self) -> str:
        lines = [
            f"kernel {self.kernel} [{self.backend}]  key {self.key}",
            f"  last get: {self.outcome} in {self.get_seconds * 1e3:.1f} ms"
            + (f", compiled {', '.join(self.compiled)} in {self.build_seconds:.2f} s"
               if self.compiled and self.outcome == "compiled" else ""),
            f"  built {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.built_at))}"
            f" in {self.last_build_seconds:.2f} s",
            f"  manifest {self.manifest}",
            *(f"  {what}: {path}" for what, path in self.artifacts.items()),
        ]
        if self.ccache is not None:
            lines.append(f"  ccache: {self.ccache[0]} hits, {self.ccache[1]} misses")
        lines += ["  changed since the previous build:"] + [f"    {c}" for c in self.changes or ["nothing"]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__


class KernelState:
    """A kernel loaded in this process: its op handles and what they depend on."""

    __slots__ = ("name", "backend", "ops", "stamps", "status")

    def __init__(self, name: str, backend: str, ops: dict, stamps, status: Status):
        # stamps: a _core.StampSet over every file the build depends on
        self.name, self.backend, self.ops, self.stamps, self.status = name, backend, ops, stamps, status


def locate(name: str) -> str:
    roots = [str(r) for r in knobs.kernel_roots()]
    found = _core.discover_kernels(roots)
    for loc in found:
        if loc.name == name:
            return loc.manifest
    names = [loc.name for loc in found]
    raise KernelNotFoundError(name, names, _core.closest_name(name, names))


def choose_backend(manifest, requested: str | None, cache_root: Path) -> str:
    if requested is None:
        requested = "cuda" if manifest.cuda.present and environment.cuda_available(cache_root) else "cpu"
    spec = manifest.cuda if requested == "cuda" else manifest.cpu
    if not spec.present:
        raise RegistryError(
            f"kernel {manifest.name!r} has no [{requested}] section in {manifest.file}; "
            f"add one, or ask for device={'cpu' if requested == 'cuda' else 'cuda'!r}"
        )
    return requested


def resolve(name: str, requested_backend: str | None, rebuild: bool, previous: KernelState | None) -> KernelState:
    start = time.perf_counter()
    manifest = _core.parse_manifest(locate(name))
    cache_root = knobs.cache_dir()
    backend = choose_backend(manifest, requested_backend, cache_root)
    store = _core.CacheStore(str(cache_root))
    env = environment.build_environment(backend, cache_root)
    # Per manifest path: two checkouts sharing a cache keep separate memos.
    memo_path = store.memo_path(f"{name}.{backend}.{_core.hash_fields_hex([('manifest', manifest.file)])[:8]}")
    memo = _core.read_memo(memo_path)

    lib_key, files, stamps, unresolved = _lib_key(manifest, backend, env, memo, rebuild)
    changes = _changes(memo, lib_key, rebuild)

    # Plans are made only for what must be built (a binding plan writes its source).
    plans = {"lib": (lib_key, lambda: _lib_plan(manifest, backend, lib_key.hex,
                                                 _previous_build_seconds(store, memo, previous)), rebuild)}
    binding_keys = {} if manifest.binding == "pybind" else \
        {op.name: keys.binding_key(op.signature, backend, env) for op in manifest.ops}
    if manifest.binding != "pybind":
        for op in manifest.ops:
            if keys.binding_namespace(op.signature, backend) in _namespaces:
                continue
            plans[op.name] = (binding_keys[op.name],
                              lambda op=op: _binding_plan(manifest, op, backend, cache_root), False)

    artifacts, ccache_delta = _artifacts(store, plans, cache_root, env.get("env.cuda_arch"))

    # Pinned before loading: a `cache gc` elsewhere cannot remove what this
    # process is about to load or has loaded.
    for a in artifacts.values():
        pins.hold(store, a.entry.key)
    ops = _load(manifest, backend, artifacts, previous)

    lib = artifacts["lib"]
    compiled = [what for what, a in artifacts.items() if a.built is not None]
    # Files the compiler reported that the scan did not see (an include spelled
    # through a macro) join the stamps. The others keep the stamps taken when
    # the key was computed: a file saved during the build must look changed.
    reported = sorted({d for a in artifacts.values() if a.built for d in a.built.deps} - set(files))
    if reported:
        stamps.stamps = list(stamps.stamps) + list(_core.StampSet(reported).stamps)
    memo_out = _core.Memo()
    memo_out.kernel, memo_out.backend = name, backend
    memo_out.env = environment.fingerprint(env)
    memo_out.keys = {"lib": lib_key.hex, **{op: key.hex for op, key in binding_keys.items()}}
    memo_out.stamps, memo_out.inputs = stamps.stamps, lib_key.inputs
    if memo is None or compiled or memo_out.env != memo.env or dict(memo_out.keys) != dict(memo.keys) \
            or _stamp_tuples(memo_out.stamps) != _stamp_tuples(memo.stamps):
        _core.write_memo(memo_path, memo_out)
    for a in artifacts.values():
        store.touch(a.entry.key)

    notes = [f"cached {what} rejected: {a.miss_reason}" for what, a in artifacts.items() if a.miss_reason]
    notes += [f"include not found in the kernel's folders: {u}" for u in unresolved]
    status = Status(
        kernel=name, backend=backend,
        outcome="compiled" if compiled else "cache",
        key=lib_key.hex, manifest=manifest.file,
        artifacts=_artifact_paths(manifest, backend, artifacts),
        build_seconds=sum(a.built.seconds for a in artifacts.values() if a.built),
        last_build_seconds=lib.entry.build_seconds, built_at=lib.entry.built_at,
        changes=changes, compiled=compiled, notes=notes, ccache=ccache_delta,
    )
    status.get_seconds = time.perf_counter() - start
    return KernelState(name, backend, ops, stamps, status)


class _RecordedKey:
    """A key taken from the memo, when every stamp still matches."""

    def __init__(self, hex_digest: str, inputs):
        self.hex, self.inputs = hex_digest, inputs


def _lib_key(manifest, backend: str, env: dict[str, str], memo, rebuild: bool):
    """(key, files, stamps, unresolved includes). When the memo's environment
    and every stamp match, the recorded key holds: only stat() calls, no
    scan, no hashing. Otherwise scan the include closure and hash."""
    if memo is not None and not rebuild and memo.env == environment.fingerprint(env) and "lib" in memo.keys:
        stamps = _core.StampSet()
        stamps.stamps = memo.stamps
        if not stamps.check().changed:
            return _RecordedKey(memo.keys["lib"], memo.inputs), stamps.paths, stamps, []
    files, unresolved = keys.kernel_files(manifest, backend, _recorded_deps(memo))
    stamps = _core.StampSet(files)
    return keys.kernel_lib_key(manifest, backend, files, env), files, stamps, unresolved


def _stamp_tuples(stamps) -> list:
    return [(s.path, s.content) for s in stamps]


def _artifact_paths(manifest, backend: str, artifacts: dict) -> dict[str, str]:
    paths = {"kernel library": artifacts["lib"].path}
    if manifest.binding != "pybind":
        for spec in manifest.ops:
            paths[f"binding {spec.name}"] = _namespaces[keys.binding_namespace(spec.signature, backend)]
    return paths


def _recorded_deps(memo) -> list[str]:
    """Files the compiler reported last time; kept in the key so a header the
    scanner cannot see (an include spelled through a macro) still counts."""
    if memo is None:
        return []
    return [s.path for s in memo.stamps if Path(s.path).is_file()]


def _changes(memo, lib_key, rebuild: bool) -> list[str]:
    if rebuild:
        return ["forced rebuild (rebuild=True)"]
    if memo is None:
        return ["no previous build recorded in this cache"]
    if memo.keys.get("lib") == lib_key.hex:
        return []
    return list(_core.diff_key_inputs(memo.inputs, lib_key.inputs)) or ["key format changed"]


class _Hit:
    """A verified cache entry (the same fields artifacts.Artifact has)."""

    built, miss_reason = None, ""

    def __init__(self, entry, path: str):
        self.entry, self.path = entry, path


def _artifacts(store, plans, cache_root: Path, cuda_arch: str | None):
    """Cache hits first; the misses build under the compiler environment, side
    by side (the binding, with torch headers, is the slow one)."""
    artifacts, missing, rejected = {}, {}, {}
    for what, (key, make_plan, force) in plans.items():
        hit = None if force else store.lookup(key.hex)
        if hit is not None and hit.entry is not None:
            artifacts[what] = _Hit(hit.entry, str(Path(hit.entry.dir) / hit.entry.artifact))
        else:
            missing[what] = (key, make_plan(), force)
            if hit is not None and hit.miss_reason:
                rejected[what] = hit.miss_reason  # the lookup removed a damaged entry
    if not missing:
        return artifacts, None
    from concurrent.futures import ThreadPoolExecutor

    from registry.artifacts import ensure
    counting = ccache.ccache_executable() is not None
    before = ccache.hit_rate(ccache.stats()) if counting else None
    forced = any(force for _, _, force in missing.values())
    with ccache.compiler_environment(cache_root, cuda_arch, recache=forced):
        if len(missing) == 1:
            (what, args), = missing.items()
            artifacts[what] = ensure(store, *args)
        else:
            with ThreadPoolExecutor(max_workers=len(missing)) as pool:
                futures = {what: pool.submit(ensure, store, *args) for what, args in missing.items()}
                try:
                    errors = [f.exception() for f in futures.values() if f.exception() is not None]
                except KeyboardInterrupt:
                    # Ctrl-C reaches this thread only: stop the workers' compilers so their builds fail now.
                    from registry.progress import stop_builds_of_this_process

                    stop_builds_of_this_process(cache_root)
                    raise
                if errors:
                    raise errors[0]
                artifacts.update({what: f.result() for what, f in futures.items()})
    for what, reason in rejected.items():
        artifacts[what].miss_reason = artifacts[what].miss_reason or reason
    if not counting:
        return artifacts, None
    after = ccache.hit_rate(ccache.stats())
    return artifacts, (after[0] - before[0], after[1] - before[1])


def _previous_build_seconds(store, memo, previous) -> float | None:
    """How long the kernel library took last time: the progress bar's estimate."""
    if previous is not None:
        return previous.status.last_build_seconds
    if memo is not None and "lib" in memo.keys:
        hit = store.lookup(memo.keys["lib"])
        if hit.entry is not None:
            return hit.entry.build_seconds
    return None


def _lib_plan(manifest, backend: str, key_hex: str, estimate_s: float | None = None):
    from registry.builder import BuildPlan

    spec = keys.backend_spec(manifest, backend)
    pybind = manifest.binding == "pybind"
    includes = keys.include_dirs(manifest)
    cflags = list(manifest.cflags) + (list(spec.cflags) if backend == "cpu" else [])
    # Launcher prototypes from the signatures, seen by every source: a launcher
    # that disagrees does not compile (core/launcher_header.h).
    prototypes = [] if pybind else ["-include", _launcher_header(manifest)]
    return BuildPlan(
        kernel=manifest.name, backend=backend,
        kind="module" if pybind else "kernel-lib",
        # A module's name must change with its key (Python caches modules by
        # name); a kernel library's must not (ccache, see builder.py).
        module_name=f"kreg_{manifest.name}_{backend}" + (f"_{key_hex[:16]}" if pybind else ""),
        sources=keys.kernel_sources(manifest, backend),
        cflags=([] if pybind else ["-fvisibility=hidden"]) + prototypes + cflags,
        cuda_cflags=([] if pybind else ["-Xcompiler=-fvisibility=hidden"]) + prototypes + list(manifest.cuda.cflags),
        ldflags=([] if pybind else ["-Wl,-Bsymbolic"]) + list(manifest.ldflags),
        include_paths=includes[1:] if pybind else includes,
        project_dirs=includes,
        estimate_s=estimate_s,
        ops=[] if pybind else list(manifest.ops),
        manifest_file=manifest.file,
    )


def _launcher_header(manifest) -> str:
    """Writes the kernel's launcher prototypes under the cache's generated/
    folder, named by content (it is a function of the manifest, which the key
    already covers), and returns its path."""
    text = _core.generate_launcher_header(manifest.name, list(manifest.ops))
    digest = _core.hash_fields_hex([("launchers", text)])[:16]
    path = knobs.cache_dir() / "v1" / "generated" / f"kreg_launchers_{manifest.name}_{digest}.h"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _core.write_file_atomic(str(path), text)
    return str(path)


def _binding_plan(manifest, op, backend: str, cache_root: Path):
    from registry.builder import BuildPlan

    namespace = keys.binding_namespace(op.signature, backend)
    # A stable path: the text depends only on the signature, so ccache and
    # error messages see the same file every time.
    source = cache_root / "v1" / "generated" / f"{namespace}.cpp"
    text = _core.generate_binding(op.signature, backend, namespace)
    if not source.exists() or source.read_text() != text:
        source.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _core.write_file_atomic(str(source), text)
    return BuildPlan(
        kernel=manifest.name, backend=backend, kind="binding", module_name=namespace,
        sources=[str(source)], cflags=["-O2"], include_paths=[str(keys.REGISTRY_INCLUDE)], project_dirs=[],
    )


def _load(manifest, backend: str, artifacts: dict, previous: KernelState | None) -> dict[str, Op]:
    import torch

    lib = artifacts["lib"]
    ops = dict(previous.ops) if previous else {}
    if manifest.binding == "pybind":
        module = _modules.get(lib.entry.key) or (lib.built.loaded if lib.built else _import_module(lib))
        _modules[lib.entry.key] = module
        for spec in manifest.ops:
            op = ops.get(spec.name) or Op.of(manifest.name, spec)
            op._set_spec(spec)
            op._swap(getattr(module, spec.name), None, backend, lib.entry.key)
            ops[spec.name] = op
        return ops

    handle = lib.built.loaded if lib.built else _libraries.get(lib.entry.key) or open_library(lib.path)
    _libraries[lib.entry.key] = handle
    for spec in manifest.ops:
        namespace = keys.binding_namespace(spec.signature, backend)
        if namespace not in _namespaces:
            binding = artifacts[spec.name]
            if binding.built is None:
                torch.ops.load_library(binding.path)
            _namespaces[namespace] = binding.path
        fn = getattr(torch.ops, namespace).call.default
        table = build_table(handle, spec, manifest.name)
        torch_ops.register_binding_fake(namespace, spec, table)
        op = ops.get(spec.name) or Op.of(manifest.name, spec)
        op._set_spec(spec)
        op._swap(fn, table, backend, lib.entry.key)
        ops[spec.name] = op
        if manifest.binding == "torch-library":
            torch_ops.expose(manifest.name, spec, backend, op)
    link_backwards(ops, manifest)
    return ops


def _import_module(artifact):
    import importlib.util

    name = Path(artifact.path).name.split(".")[0]
    spec = importlib.util.spec_from_file_location(name, artifact.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
