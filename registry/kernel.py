"""Resolving a kernel name to loaded, ready ops: the slow path of `get`.

  manifest -> backend -> environment -> keys (memo fast path, or scan + hash
  + the cache's dependency record)
  -> artifacts (cache hit, or lock/build/publish, in parallel)
  -> load (dlopen the kernel library, register the binding once per process)
  -> swap the launcher tables of the op handles -> write the memo

Nothing here runs when `get` finds its stamps unchanged (see api.py).
"""
from __future__ import annotations

import time
from pathlib import Path

from registry import _core, ccache, environment, keys, knobs, pins, remote, torch_ops
from registry.errors import KernelNotFoundError, ManifestError, RegistryError
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
    device              compiler = "nvrtc": which NVRTC compiled the device code, and the cubin's key
    """

    def __init__(self, *, kernel, backend, outcome, key, manifest, artifacts, build_seconds,
                 last_build_seconds, built_at, changes, compiled, notes=(), ccache=None,
                 sources=None, remote=None, device=None):
        self.kernel, self.backend, self.outcome, self.key = kernel, backend, outcome, key
        self.manifest, self.artifacts = manifest, artifacts
        self.build_seconds, self.last_build_seconds, self.built_at = build_seconds, last_build_seconds, built_at
        self.changes, self.compiled, self.notes = list(changes), list(compiled), list(notes)
        self.ccache = tuple(ccache[:2]) if ccache is not None else None
        self.ccache_remote = tuple(ccache[2:]) if ccache is not None and len(ccache) > 2 else None
        self.sources, self.remote = dict(sources or {}), remote
        self.device = device
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
        if self.device is not None:
            lines.append(f"  device code: {self.device}")
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
                      changes=(), compiled=(), device=self.device)


class KernelState:
    """A kernel loaded in this process: its op handles and what they depend on.

    status is what the last get did; in_process, made once here, is what
    every get served by the hot path reports (so that path allocates nothing).
    """

    __slots__ = ("name", "backend", "ops", "stamps", "status", "in_process")

    def __init__(self, name: str, backend: str, ops: dict, stamps, status: Status):
        # stamps: a _core.StampSet over every file the build depends on
        self.name, self.backend, self.ops, self.stamps, self.status = name, backend, ops, stamps, status
        self.in_process = status.served_in_process()


def locate(name: str) -> str:
    roots = [str(r) for r in knobs.kernel_roots()]
    found = _core.discover_kernels(roots)
    for loc in found:
        if loc.name == name:
            return loc.manifest
    _refuse_a_second_name(name, found)
    names = [loc.name for loc in found]
    raise KernelNotFoundError(name, names, _core.closest_name(name, names), roots)


def _refuse_a_second_name(name: str, found) -> None:
    """A kernel is named by its folder, and the parser refuses a manifest whose
    `name` key says otherwise. When `name` is such a key, raise that error
    (which folder to rename, to what) instead of "no kernel named ...".
    Parses every manifest, so it runs only when no folder is named `name`."""
    for loc in found:
        try:
            _core.parse_manifest(loc.manifest)
        except ManifestError as error:
            if error.field == "name" and f'name = "{name}" differs' in str(error):
                raise


def choose_backend(manifest, requested: str | None, cache_root: Path) -> str:
    if requested is None:
        requested = "cuda" if manifest.cuda.present and environment.cuda_available(cache_root) else "cpu"
    spec = manifest.cuda if requested == "cuda" else manifest.cpu
    if requested == "cuda" and spec.compiler == "nvrtc" and manifest.binding == "pybind":
        raise RegistryError(
            f"kernel {manifest.name!r}: compiler = \"nvrtc\" needs the generated binding (its launchers "
            f"are bound to the NVRTC module); remove binding = \"pybind\" from {manifest.file}, or use nvcc"
        )
    if not spec.present:
        raise RegistryError(
            f"kernel {manifest.name!r} has no [{requested}] section in {manifest.file}; "
            f"add one, or ask for device={'cpu' if requested == 'cuda' else 'cuda'!r}"
        )
    return requested


def resolve(name: str, requested_backend: str | None, rebuild: bool, previous_of) -> KernelState:
    """previous_of(backend): the kernel's state loaded in this process for that
    backend, or None. Asked after the backend is chosen, so a request that
    names the backend and one that leaves it to the default share handles."""
    start = time.perf_counter()
    manifest = _core.parse_manifest(locate(name))
    cache_root = knobs.cache_dir()
    backend = choose_backend(manifest, requested_backend, cache_root)
    previous = previous_of(backend)
    store = _core.CacheStore(str(cache_root))
    env = environment.build_environment(backend, cache_root, nvcc_optional=keys.uses_nvrtc(manifest, backend))
    # Per manifest path: two checkouts sharing a cache keep separate memos.
    memo_path = store.memo_path(f"{name}.{backend}.{_core.hash_fields_hex([('manifest', manifest.file)])[:8]}")
    memo = _core.read_memo(memo_path)

    lib_key = _lib_key(store, manifest, backend, env, memo, rebuild)
    device = None
    if keys.uses_nvrtc(manifest, backend):
        # The cubin first: NVRTC takes ~0.1-0.2 s, and a device-only edit leaves the host key alone.
        from registry import device_build

        device = device_build.ensure(store, manifest, env.get("env.cuda_arch"), memo,
                                     trust_memo=isinstance(lib_key.key, _RecordedKey), force=rebuild)

    # Plans are made only for what must be built (a binding plan writes its source).
    plans = {"lib": (lib_key, lambda: _lib_plan(manifest, backend, lib_key.lock_hex,
                                                 _previous_build_seconds(store, memo, previous)), rebuild)}
    binding_keys = {} if manifest.binding == "pybind" else \
        {op.name: keys.binding_key(op.signature, backend, env) for op in manifest.ops}
    if manifest.binding != "pybind":
        for op in manifest.ops:
            if keys.binding_namespace(op.signature, backend) in _namespaces:
                continue
            plans[op.name] = (keys.FixedKey(binding_keys[op.name]),
                              lambda op=op: _binding_plan(manifest, op, backend, cache_root), False)

    team = remote.current()
    team_before = dict(team.counts) if team is not None else None
    artifacts, ccache_delta = _artifacts(store, plans, cache_root, env.get("env.cuda_arch"), manifest.dir)

    # Pinned before loading: a `cache gc` elsewhere cannot remove what this
    # process is about to load or has loaded.
    for a in artifacts.values():
        pins.hold(store, a.entry.key)
    if device is not None:
        pins.hold(store, device.key)
    ops = _load(manifest, backend, artifacts, previous, device)

    lib = artifacts["lib"]
    compiled = [what for what, a in artifacts.items() if a.built is not None]
    if device is not None and device.built is not None:
        compiled.append("device")
    # The artifact key is known now (from the record, or from the build), and
    # the stamps cover the files the compiler read beyond the scan, and the
    # device code's files (the cubin's own key covers those).
    final_key = lib_key.key
    changes = _changes(memo, final_key, rebuild)
    stamps = _core.StampSet()
    stamps.stamps = lib_key.stamps
    if device is not None:
        changes += _device_changes(store, memo, device)
        if device.stamps is not None:
            known = {s.path for s in stamps.stamps}
            stamps.stamps = list(stamps.stamps) + [s for s in device.stamps if s.path not in known]
    memo_out = _core.Memo()
    memo_out.kernel, memo_out.backend = name, backend
    memo_out.env = environment.fingerprint(env)
    memo_out.keys = {"lib": final_key.hex, **{op: key.hex for op, key in binding_keys.items()},
                     **({"device": device.key} if device else {})}
    memo_out.stamps, memo_out.inputs = stamps.stamps, final_key.inputs
    if memo is None or compiled or memo_out.env != memo.env or dict(memo_out.keys) != dict(memo.keys) \
            or _stamp_tuples(memo_out.stamps) != _stamp_tuples(memo.stamps):
        _core.write_memo(memo_path, memo_out)
    for a in artifacts.values():
        store.touch(a.entry.key)
    if device is not None:
        store.touch(device.key)

    notes = [f"cached {what} rejected: {a.miss_reason}" for what, a in artifacts.items() if a.miss_reason]
    notes += [f"include not found in the kernel's folders: {u}" for u in lib_key.unresolved]
    if team is not None and team.problem:
        notes.append(team.problem)
    fetched = any(a.source == "remote" for a in artifacts.values())
    status = Status(
        kernel=name, backend=backend,
        outcome="compiled" if compiled else "remote" if fetched else "cache",
        key=final_key.hex, manifest=manifest.file,
        artifacts=_artifact_paths(manifest, backend, artifacts),
        build_seconds=sum(a.built.seconds for a in artifacts.values() if a.built)
        + (device.built.seconds if device and device.built else 0.0),
        last_build_seconds=lib.entry.build_seconds, built_at=lib.entry.built_at,
        changes=changes, compiled=compiled, notes=notes, ccache=ccache_delta,
        sources={what: a.source for what, a in artifacts.items()},
        remote=_remote_summary(team, team_before),
        device=f"{device.nvrtc.identity()}, cubin key {device.key}" if device else None,
    )
    if device is not None:
        status.artifacts["device code (cubin)"] = device.path
    status.get_seconds = time.perf_counter() - start
    return KernelState(name, backend, ops, stamps, status)


class _RecordedKey:
    """A key taken from the memo, when every stamp still matches."""

    def __init__(self, hex_digest: str, inputs):
        self.hex, self.inputs = hex_digest, inputs


def _lib_key(store, manifest, backend: str, env: dict[str, str], memo, rebuild: bool):
    """A keys.LibKey, or the memo's key when the memo's environment and every
    stamp match: only stat() calls, no scan, no hashing. The memo is this
    checkout's shortcut only; the cache's dependency record is what makes
    the key right for any process."""
    if memo is not None and not rebuild and memo.env == environment.fingerprint(env) and "lib" in memo.keys:
        stamps = _core.StampSet()
        stamps.stamps = memo.stamps
        if not stamps.check().changed:
            return keys.FixedKey(_RecordedKey(memo.keys["lib"], memo.inputs), stamps.stamps)
    return keys.LibKey(store, manifest, backend, env)


def _stamp_tuples(stamps) -> list:
    return [(s.path, s.content) for s in stamps]


def _artifact_paths(manifest, backend: str, artifacts: dict) -> dict[str, str]:
    paths = {"kernel library": artifacts["lib"].path}
    if manifest.binding != "pybind":
        for spec in manifest.ops:
            paths[f"binding {spec.name}"] = _namespaces[keys.binding_namespace(spec.signature, backend)]
    return paths


def _device_changes(store, memo, device) -> list[str]:
    """Why the cubin differs from the previous one: "device: file:axpy_device.cu changed"."""
    if memo is None or device.built is None or memo.keys.get("device") in (None, device.key):
        return []
    before = store.lookup(memo.keys["device"]).entry
    if before is None:
        return ["device: the previous cubin is no longer cached"]
    return [f"device: {c}" for c in _core.diff_key_inputs(before.inputs, device.entry.inputs)]


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

    built, miss_reason, source = None, "", "cache"

    def __init__(self, entry, path: str):
        self.entry, self.path = entry, path


def _artifacts(store, plans, cache_root: Path, cuda_arch: str | None, manifest_dir: str):
    """Cache hits first, then the team's remote cache (REGISTRY_REMOTE_CACHE);
    what is still missing builds under the compiler environment, side by side
    (the binding, with torch headers, is the slow one)."""
    artifacts, missing, rejected = {}, {}, {}
    for what, (key, make_plan, force) in plans.items():
        known = None if force else key.match()
        hit = None if known is None else store.lookup(known.hex)
        if hit is not None and hit.entry is not None:
            artifacts[what] = _Hit(hit.entry, str(Path(hit.entry.dir) / hit.entry.artifact))
        else:
            missing[what] = (key, make_plan, force)
            if hit is not None and hit.miss_reason:
                rejected[what] = hit.miss_reason  # the lookup removed a damaged entry
    team = remote.current()
    if team is not None:
        team.share([a.entry for a in artifacts.values()])  # built before the remote was set up
        if missing and team.available():
            from registry.artifacts import fetch_remote

            for what, (key, _, force) in list(missing.items()):
                known = None if force else key.match_remote(team)
                if known is not None:
                    fetched, note = fetch_remote(store, known.hex, team)
                    if fetched is not None:
                        artifacts[what] = fetched
                        del missing[what]
                    elif note:
                        rejected[what] = note
    if not missing:
        for what, reason in rejected.items():
            artifacts[what].miss_reason = artifacts[what].miss_reason or reason
        return artifacts, None
    from concurrent.futures import ThreadPoolExecutor

    from registry.artifacts import ensure
    missing = {what: (key, make_plan(), force, team) for what, (key, make_plan, force) in missing.items()}
    counting = ccache.ccache_executable() is not None and any(p.through_ccache(t) for _, p, _, t in missing.values())
    before = ccache.stats() if counting else None
    forced = any(force for _, _, force, _ in missing.values())
    with ccache.compiler_environment(cache_root, cuda_arch, recache=forced, team=team, source_dir=manifest_dir):
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
    return artifacts, ccache.delta(before, ccache.stats(), remote_storage=team is not None)


def _remote_summary(team, before: dict | None) -> dict | None:
    """What this get did with the remote cache: where, hits, misses, rejected, stored."""
    if team is None:
        return None
    return {"where": team.display, "mode": "read-write" if team.writable else "read-only",
            **{k: team.counts[k] - before.get(k, 0) for k in team.counts}}


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
    # The host's defaults first, so a manifest flag (-mno-f16c, say) wins.
    # [cuda] cflags go to nvcc, except with NVRTC: then the [cuda] sources are host C++.
    host_flags = backend == "cpu" or keys.uses_nvrtc(manifest, backend)
    cflags = [*environment.host_cxx_flags(), *manifest.cflags, *(spec.cflags if host_flags else [])]
    # Launcher prototypes from the signatures, seen by every source: a launcher
    # that disagrees does not compile (core/launcher_header.h).
    prototypes = [] if pybind else ["-include", _launcher_header(manifest)]
    return BuildPlan(
        kernel=manifest.name, backend=backend,
        kind="module" if pybind else "kernel-lib",
        # A module's name changes with its scanned content (Python caches
        # modules by name); a kernel library's must not (ccache, see builder.py).
        module_name=f"kreg_{manifest.name}_{backend}" + (f"_{key_hex[:16]}" if pybind else ""),
        sources=keys.kernel_sources(manifest, backend),
        cflags=([] if pybind else ["-fvisibility=hidden"]) + prototypes + cflags,
        cuda_cflags=([] if pybind else ["-Xcompiler=-fvisibility=hidden"]) + prototypes + keys.nvcc_flags(manifest),
        # -z defs: a symbol no source defines fails the link, where it can be
        # named with its declaration (builder.py), not the first dlopen.
        ldflags=([] if pybind else ["-Wl,-Bsymbolic", "-Wl,-z,defs"]) + list(manifest.ldflags),
        include_paths=includes[1:] if pybind else includes,
        project_dirs=includes,
        estimate_s=estimate_s,
        cuda_toolkit=not keys.uses_nvrtc(manifest, backend),
        direct=keys.built_directly(manifest, backend),
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
    if _read_bytes(path) != text.encode():  # verified, as everything read back from the cache
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
    # Compared as bytes, never decoded: whatever the file holds (damaged, not
    # UTF-8, cut short), anything but the exact text is written again.
    if _read_bytes(source) != text.encode():
        source.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _core.write_file_atomic(str(source), text)
    return BuildPlan(
        kernel=manifest.name, backend=backend, kind="binding", module_name=namespace,
        sources=[str(source)], cflags=["-O2"], include_paths=[str(keys.REGISTRY_INCLUDE)], project_dirs=[],
    )


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _load(manifest, backend: str, artifacts: dict, previous: KernelState | None, device=None) -> dict[str, Op]:
    """Exactly the manifest's ops. A handle the notebook holds for an op that
    is still defined runs the new code; one whose op left the manifest (or was
    renamed) is removed, so calling it says so instead of running old code."""
    import torch

    lib = artifacts["lib"]
    before = previous.ops if previous else {}
    ops = {}
    if manifest.binding == "pybind":
        module = _modules.get(lib.entry.key) or (lib.built.loaded if lib.built else _import_module(lib))
        _modules[lib.entry.key] = module
        for spec in manifest.ops:
            op = before.get(spec.name) or Op.of(manifest.name, spec)
            op._swap(getattr(module, spec.name), None, backend, lib.entry.key, *_signature_of(spec))
            op._set_spec(spec)
            ops[spec.name] = op
        _remove_dropped(manifest, before, ops)
        return ops

    handle = lib.built.loaded if lib.built else _libraries.get(lib.entry.key) or open_library(lib.path)
    _libraries[lib.entry.key] = handle
    if device is not None:
        from registry import device_module

        device_module.bind(handle, device.key, device.path)
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
        op = before.get(spec.name) or Op.of(manifest.name, spec)
        op._swap(fn, table, backend, lib.entry.key, *_signature_of(spec))
        op._set_spec(spec)
        ops[spec.name] = op
        if manifest.binding == "torch-library":
            torch_ops.expose(manifest.name, spec, backend, op)
    link_backwards(ops, manifest)
    _remove_dropped(manifest, before, ops)
    return ops


def _signature_of(spec) -> tuple[str, list[str]]:
    return spec.signature.canonical(), [a.name for a in spec.signature.args]


def _remove_dropped(manifest, before: dict[str, Op], ops: dict[str, Op]) -> None:
    for name, op in before.items():
        if name not in ops:
            op._remove(
                f"op {name!r} is no longer part of kernel {manifest.name!r}: {manifest.file} does not define it "
                f"any more. The kernel's ops are now {', '.join(ops)}; use registry.get({manifest.name!r}) for them."
            )


def _import_module(artifact):
    import importlib.util

    name = Path(artifact.path).name.split(".")[0]
    spec = importlib.util.spec_from_file_location(name, artifact.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
