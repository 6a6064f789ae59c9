"""Resolving a kernel name to loaded, ready ops: the slow path of `get`.

  find + parse the manifest (one core call) -> backend -> environment facts
  -> the plan (one core call, core/plan.h: keys, memo verdict, lookups,
     what to build and why)
  -> act on it: fetch or build what misses (misses.py) and, beside them, the
     artifacts keyed apart (APART, below: the cubin of device code with its
     own compiler); pin, load and swap (load.py) -> record the outcome (one
     core call: the memo)

Nothing here runs when `get` finds its stamps unchanged (registry/__init__.py).
"""
from __future__ import annotations

import time
from pathlib import Path

from registry import _core, environment, knobs
from registry.state import STATE, KernelState, Status

__all__ = ["KernelState", "Status", "find", "resolve"]

# The build machinery (registry.builder, ThreadPoolExecutor) is imported only
# when something must be built: a fresh process that finds everything cached
# should not pay for it.


def find(name: str):
    """The parsed manifest of kernel `name` (its name or its folder's; one
    core call when it exists): a notebook cell's held in memory
    (core/inline_kernels.h), else a kernel folder's; or the error that says
    why there is none."""
    roots = [str(r) for r in knobs.kernel_roots()]
    manifest = _core.find_kernel(name, roots)
    if manifest is None:
        _raise_not_found(name, roots)
    return manifest


def _raise_not_found(name: str, roots: list[str]):
    """Why no kernel is `name`: its folder cannot be a kernel, or which names there are."""
    import os

    from registry.errors import KernelFolderError, KernelNotFoundError

    found = _core.discover(roots)
    for folder in found.unusable:
        if name and name in (folder.name, os.path.basename(folder.dir)):
            # A manifest error (an invalid name key) is raised as such, naming its field.
            _core.parse_manifest(os.path.join(folder.dir, "kernel.toml"))
            raise KernelFolderError(name, folder.dir, folder.reason)
    cells = _core.inline_kernel_names()
    names = cells + [loc.name for loc in found.kernels]
    shown = [f"{cell} (a %%kernel cell)" for cell in cells] + [
        loc.name if loc.folder == loc.name else f"{loc.name} (folder {loc.folder})" for loc in found.kernels]
    closest = _core.closest_name(name, names + [loc.folder for loc in found.kernels if loc.folder != loc.name])
    raise KernelNotFoundError(name, names, closest, roots, shown)


# Artifacts keyed apart from the core's plan: built or found beside the plan's
# misses, then pinned, loaded, recorded (the memo keeps their keys and stamps
# as given: core/plan.h's Outcome.apart) and shown as the plan's are. resolve
# asks this table, not any kind by name. A kind: whether a manifest's backend
# has one, and the module (imported only then, so a get without one loads
# none of it) whose start(manifest, plan, store, env, cache_root, rebuild=,
# remote=, host_misses=) returns a job whose result() is the artifact (entry,
# built, key, path, stamps, source, miss_reason, as builder/artifacts.Artifact)
# and whose status_line(artifact) is what registry.status shows for it. Kept
# here rather than in a module of its own: a cached get imports no more
# modules than it needs (tests/test_core_calls.py).
APART = {
    # The cubin of device code with its own compiler ([cuda] compiler = "nvrtc" / "nvcc-cubin").
    "device": (lambda manifest, backend: bool(environment.section(manifest, backend).device_compiler),
               "registry.device.in_get"),
}


def _start_apart(manifest, backend: str, plan, store, env: dict, cache_root, *, rebuild: bool, remote,
                 host_misses: bool) -> dict:
    """{kind: job} for each kind of APART the manifest has on `backend`."""
    import importlib

    return {kind: importlib.import_module(module).start(manifest, plan, store, env, cache_root, rebuild=rebuild,
                                                        remote=remote, host_misses=host_misses)
            for kind, (wanted, module) in APART.items() if wanted(manifest, backend)}


def _apart_status_lines(artifacts: dict) -> dict[str, str]:
    """{kind: its status line} for each artifact of an APART kind."""
    import importlib

    return {kind: importlib.import_module(APART[kind][1]).status_line(artifacts[kind])
            for kind in APART if kind in artifacts}


def resolve(name: str, requested_backend: str | None, rebuild: bool, previous_of, manifest=None,
            load_ops: bool = True, *, foreign_binding_retry: bool = True) -> KernelState:
    """name: the kernel's name or its folder's. previous_of(backend, kernel name):
    the kernel's state loaded in this process for that backend, or None. Asked after the backend is chosen, so a request that
    names the backend and one that leaves it to the default share handles.
    manifest: a kernel derived in memory (core/derived_manifest.h): another
    config (_core.with_config), for registry.tune and the tuned table's winners,
    or a checked build (_core.with_extra_flags); its ops are new handles, never
    exposed as torch.ops. load_ops=False builds, publishes and pins without
    loading anything into this process (a checked build runs only in a worker):
    the state's ops are then empty. foreign_binding_retry: a cached binding
    that needs a newer C++ runtime than this process has is removed and built
    here (once)."""
    start = time.perf_counter()
    variant = manifest is not None
    manifest = manifest if variant else find(name)
    name = manifest.name
    cache_root = knobs.cache_dir()
    backend = environment.for_manifest(manifest, requested_backend, cache_root)
    previous = previous_of(backend, name)
    store = _core.CacheStore(str(cache_root))
    env = environment.build_environment_for(manifest, backend, cache_root)
    plan = _core.make_plan(manifest, store, backend, env, str(knobs.REGISTRY_INCLUDE), list(STATE.namespaces), rebuild,
                           header_packages(manifest))
    planned = plan.artifacts  # a copy on each access (pybind11): read once
    team = _team() if foreign_binding_retry else None  # the retry builds here: the team has the foreign one
    team_before = dict(team.counts) if team is not None else None
    jobs = _start_apart(manifest, backend, plan, store, env, cache_root, rebuild=rebuild, remote=team,
                        host_misses=any(a.missing for a in planned))  # artifacts keyed apart: the cubin

    artifacts = {a.what: _Hit(a.hit) for a in planned if not a.missing}
    if team is not None:
        team.share([a.entry for a in artifacts.values()])  # built before the remote was set up
    targets, ccache_delta = {}, None
    if len(artifacts) < len(planned):
        from registry.builder.artifacts import Target
        from registry.builder.misses import build_missing
        from registry.builder.torch_library_code import refuse_hand_written_library

        targets = {a.what: Target(a) for a in planned if a.missing}
        estimate = previous.status.last_build_seconds if previous is not None else plan.previous_build_seconds
        previous_library = previous.status.artifacts.get("kernel library") if previous is not None else None
        try:
            refuse_hand_written_library(manifest, backend)  # before its code can register anything
            built, ccache_delta = build_missing(store, plan, manifest, dict(targets), estimate, cache_root,
                                                env.get("env.cuda_arch"), previous_library)
        except Exception:
            for job in jobs.values():
                job.result()  # a device compile error is the one to read first, as before
            raise
        for what, artifact in built.items():
            artifact.miss_reason = artifact.miss_reason or _miss_reason(planned, what)
        artifacts.update(built)
    # Keyed apart from the plan: the memo records their keys and stamps as given.
    kept_apart = {what: job.result() for what, job in jobs.items()}
    artifacts.update(kept_apart)

    # Pinned (and marked used) before loading: a `cache gc` elsewhere cannot
    # remove what this process is about to load or has loaded.
    STATE.pins.hold(store, [a.entry.key for a in artifacts.values()])
    from registry.load import BindingNeedsNewerRuntime, load

    try:
        ops = load(manifest, plan, artifacts, previous, expose=not variant) if load_ops else {}
    except BindingNeedsNewerRuntime as error:
        if not foreign_binding_retry:
            raise
        # Another machine's build (its key holds no compiler): build it here, once.
        import warnings

        warnings.warn(f"{error}; building it on this machine instead", stacklevel=2)
        store.remove(artifacts["binding"].entry.key)
        return resolve(name, requested_backend, rebuild, previous_of, manifest if variant else None, load_ops,
                       foreign_binding_retry=False)
    tuned = None
    if manifest.tunable and not variant:
        if _tuned_before(name, backend, cache_root):
            from registry import tuned as tuned_table

            tuned = tuned_table.apply(name, backend, manifest, artifacts["lib"].entry.key, ops,
                                      lambda config, dtype: resolve(name, backend, False, lambda *_: None,
                                                                    tuned_table.config_manifest(manifest, backend,
                                                                                                config, dtype)).ops)
        else:
            tuned = "not tuned; the default config runs (registry.tune searches the manifest's [tune] space)"

    compiled = [what for what, a in artifacts.items() if a.built is not None]
    if compiled:
        _show_compiler_warnings(name, artifacts)
    lib_target = targets.get("lib")
    rekeyed = lib_target is not None and lib_target.rekeyed
    if rekeyed or compiled or kept_apart or not plan.memo_current:
        # The artifact key is known now (from the record, or from the build), and
        # the stamps cover the files the compiler read beyond the scan, and those
        # of the artifacts keyed apart (the cubin's own key covers the device code's).
        changes, _ = _core.record_outcome(
            plan, store, lib_key=lib_target.key if rekeyed else None,
            lib_extra_stamps=lib_target.extra_stamps if rekeyed else [],
            apart={what: (a.key, list(a.stamps or [])) for what, a in kept_apart.items()}, compiled=bool(compiled))
        if compiled:
            # Beside the caller, not before the result (cache_cap.py); the cap
            # is read here, so a bad setting still fails this call.
            from registry.builder import cache_cap

            cache_cap.collect_garbage_soon(store, knobs.cache_max_bytes(), [a.entry.key for a in artifacts.values()])
        changes = list(changes)
    else:
        changes = list(plan.changes)
    for what, artifact in kept_apart.items():
        changes += _apart_changes(store, plan.memo, what, artifact)

    lib = artifacts["lib"]
    notes = [f"cached {what} rejected: {a.miss_reason}" for what, a in artifacts.items() if a.miss_reason]
    notes += [f"include not found in the kernel's folders: {u}" for u in plan.unresolved]
    if team is not None and team.problem:
        notes.append(team.problem)
    fetched = any(a.source == "remote" for a in artifacts.values())
    status = Status(
        kernel=name, backend=backend,
        outcome="compiled" if compiled else "remote" if fetched else "cache",
        key=lib.entry.key, manifest=manifest.file,
        artifacts=_artifact_paths(manifest, plan, artifacts),
        build_seconds=sum(a.built.seconds for a in artifacts.values() if a.built),
        last_build_seconds=lib.entry.build_seconds, built_at=lib.entry.built_at,
        changes=changes, compiled=compiled, notes=notes, ccache=ccache_delta,
        sources={what: a.source for what, a in artifacts.items()},
        remote=_remote_summary(team, team_before),
        tuned=tuned, **_apart_status_lines(artifacts),
    )
    status.get_seconds = time.perf_counter() - start
    return KernelState(name, backend, ops, plan.stamp_set, status)


def _show_compiler_warnings(name: str, artifacts: dict) -> None:
    """What the compilers of this get's builds warned, once (builder/compiler_warnings.py)."""
    from registry.builder import compiler_warnings

    warned = [(what, artifacts[what].built.warnings) for what in ("lib", "binding", "device")
              if what in artifacts and artifacts[what].built is not None]
    described = {"lib": "the kernel library", "binding": "the shared binding", "device": "the device code (cubin)"}
    compiler_warnings.show(name, [(described[what], lines) for what, lines in warned],
                           artifacts["lib"].entry.key if "lib" in artifacts else "")


def header_packages(manifest) -> list:
    """The manifest's header packages as found here (registry/header_packages.py);
    nothing is imported for a kernel that names none."""
    if not manifest.header_packages:
        return []
    from registry import header_packages as packages

    return packages.resolve(manifest)


def _tuned_before(name: str, backend: str, cache_root: Path) -> bool:
    """Whether a tuned table of this kernel may exist, locally or in the team
    cache: a cached get of a kernel never tuned costs one listing, no import."""
    if knobs.remote_cache() is not None:
        return True
    import os

    prefix = f"{name}.{backend}."
    try:
        return any(entry.startswith(prefix) for entry in os.listdir(knobs.cache_path("tuned", cache_root)))
    except OSError:  # no tuned/ folder: nothing was ever tuned here
        return False


def _team():
    """The team's remote cache, or None; team_cache.py is imported only when one is set."""
    if knobs.remote_cache() is None:
        return None
    from registry.remote import team_cache

    return team_cache.current()


class _Hit:
    """A verified cache entry (the same fields artifacts.Artifact has)."""

    built, miss_reason, source = None, "", "cache"

    def __init__(self, entry):
        self.entry, self.path = entry, str(Path(entry.dir) / entry.artifact)


def _miss_reason(planned, what: str) -> str:
    """Why the plan's lookup rejected (and removed) a cached entry, if it did."""
    return next((a.miss_reason for a in planned if a.what == what), "")


def _artifact_paths(manifest, plan, artifacts: dict) -> dict[str, str]:
    paths = {"kernel library": artifacts["lib"].path}
    if manifest.binding != "pybind":
        for spec in manifest.ops:
            paths[f"binding {spec.name}"] = STATE.namespaces[plan.namespaces[spec.name]]
    if "device" in artifacts:
        paths["device code (cubin)"] = artifacts["device"].path
    return paths


def _apart_changes(store, memo, what: str, artifact) -> list[str]:
    """Why an artifact keyed apart from the plan differs from the memo's, when
    it was built now: "device: file:axpy_device.cu changed"."""
    if memo is None or artifact.built is None or memo.keys.get(what) in (None, artifact.key):
        return []
    before = store.lookup(memo.keys[what]).entry
    if before is None:
        return [f"{what}: the previous one is no longer cached"]
    return [f"{what}: {c}" for c in _core.diff_key_inputs(before.inputs, artifact.entry.inputs)]


def _remote_summary(team, before: dict | None) -> dict | None:
    """What this get did with the remote cache: where, hits, misses, rejected, stored."""
    if team is None:
        return None
    return {"where": team.display, "mode": "read-write" if team.writable else "read-only",
            **{k: team.counts[k] - before.get(k, 0) for k in team.counts}}
