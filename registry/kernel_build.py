"""Acting on a plan's misses: what to build with which inputs (BuildPlan),
the team's remote cache first, then the builds side by side.

Imported only when something is missing: a fresh process that finds
everything cached does not pay for the build machinery."""
from __future__ import annotations

from pathlib import Path

from registry import _core, ccache, environment, keys, knobs, remote
from registry.artifacts import Artifact, Target, ensure, fetch_remote
from registry.builder import BuildPlan


def lib_plan(manifest, backend: str, key_hex: str, estimate_s: float | None = None, plan=None,
             previous_library: str | None = None) -> BuildPlan:
    """The kernel library's (or pybind module's) build. plan: the _core.Plan,
    whose sources, include path, launcher prototypes (written) and launcher
    symbols it takes; asked of the core when not given (tools, tests)."""
    spec = keys.backend_spec(manifest, backend)
    pybind = manifest.binding == "pybind"
    includes = list(plan.include_dirs) if plan is not None else keys.include_dirs(manifest)
    # The host's defaults first, so a manifest flag (-mno-f16c, say) wins.
    # [cuda] cflags go to nvcc, except with a device cubin: then the [cuda] sources are host C++.
    host_flags = backend == "cpu" or keys.uses_device_module(manifest, backend)
    cflags = [*environment.host_cxx_flags(), *manifest.cflags, *(spec.cflags if host_flags else [])]
    # Launcher prototypes from the signatures, seen by every source: a launcher
    # that disagrees does not compile (core/launcher_header.h).
    prototypes = [] if pybind else ["-include", (plan.launcher_header if plan is not None else "")
                                    or _launcher_header(manifest)]
    return BuildPlan(
        kernel=manifest.name, backend=backend,
        kind="module" if pybind else "kernel-lib",
        # A module's name changes with its scanned content (Python caches
        # modules by name); a kernel library's must not (ccache, see builder.py).
        module_name=f"kreg_{manifest.name}_{backend}" + (f"_{key_hex[:16]}" if pybind else ""),
        sources=list(plan.sources) if plan is not None else keys.kernel_sources(manifest, backend),
        cflags=([] if pybind else ["-fvisibility=hidden"]) + prototypes + cflags,
        cuda_cflags=([] if pybind else ["-Xcompiler=-fvisibility=hidden"]) + prototypes + keys.nvcc_flags(manifest),
        # -z defs: a symbol no source defines fails the link, where it can be
        # named with its declaration (builder.py), not the first dlopen.
        ldflags=([] if pybind else ["-Wl,-Bsymbolic", "-Wl,-z,defs"]) + list(manifest.ldflags),
        include_paths=includes[1:] if pybind else includes,
        project_dirs=includes,
        estimate_s=estimate_s,
        cuda_toolkit=not keys.uses_device_module(manifest, backend),
        direct=plan.built_directly if plan is not None else keys.built_directly(manifest, backend),
        ops=[] if pybind else list(manifest.ops),
        manifest_file=manifest.file,
        launchers=[] if pybind or plan is None else [s for symbols in plan.launchers.values() for _, s in symbols],
        previous_library=previous_library,
    )


def _launcher_header(manifest) -> str:
    """The prototypes outside a plan (tools, tests): written where a plan writes them."""
    text = _core.generate_launcher_header(manifest.name, list(manifest.ops))
    digest = _core.hash_fields_hex([("launchers", text)])[:16]
    path = knobs.cache_path("generated") / f"kreg_launchers_{manifest.name}_{digest}.h"
    _write_generated(path, text)
    return str(path)


def binding_plan(manifest, op, backend: str, cache_root: Path, artifact=None) -> BuildPlan:
    """An op's binding build. artifact: the plan's (_core.ArtifactPlan), which
    names the namespace and has written the source; made here when not given."""
    if artifact is not None:
        namespace, source = artifact.namespace, artifact.source
    else:
        namespace = keys.binding_namespace(op.signature, backend)
        source = str(knobs.cache_path("generated", cache_root) / f"{namespace}.cpp")
        _write_generated(Path(source), _core.generate_binding(op.signature, backend, namespace))
    return BuildPlan(
        kernel=manifest.name, backend=backend, kind="binding", module_name=namespace,
        sources=[source], cflags=["-O2"], include_paths=[str(keys.REGISTRY_INCLUDE)], project_dirs=[],
        # No CUDA header in a binding (core/codegen.cc): it reaches streams and
        # guards through c10, so load() builds it as host C++, with or without
        # a toolkit: no nvcc probe, no CUDA runtime linked (core/plan.cc's binding_key).
        cuda_toolkit=False,
    )


def _write_generated(path: Path, text: str) -> None:
    # Compared as bytes, never decoded: whatever the file holds (damaged, not
    # UTF-8, cut short), anything but the exact text is written again.
    try:
        if path.read_bytes() == text.encode():
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _core.write_file_atomic(str(path), text)


def build_missing(store, plan, manifest, targets: dict, estimate_s, cache_root: Path, cuda_arch: str | None,
                  previous_library: str | None = None):
    """targets: what -> Target for each artifact the plan misses. The team's
    remote cache first (REGISTRY_REMOTE_CACHE); what is still missing builds
    under the compiler environment, side by side (the binding, with torch
    headers, is the slow one). previous_library: the kernel library loaded
    before in this process, if any. Returns (what -> Artifact, ccache counts or None)."""
    artifacts, rejected = {}, {}
    team = remote.current()
    if team is not None and team.available():
        for what, target in list(targets.items()):
            known = None if target.artifact.force else target.match_remote(team)
            if known is not None:
                fetched, note = fetch_remote(store, known.hex, team)
                if fetched is not None:
                    artifacts[what] = fetched
                    del targets[what]
                elif note:
                    rejected[what] = note
    if targets:
        builds = {what: (target, _build_plan(plan, manifest, target, estimate_s, cache_root, previous_library))
                  for what, target in targets.items()}
        counting = ccache.ccache_executable() is not None and any(
            plan.through_ccache(team) for _, plan in builds.values())
        before = ccache.stats() if counting else None
        forced = any(target.artifact.force for target in targets.values())
        with ccache.compiler_environment(cache_root, cuda_arch, recache=forced, team=team,
                                         source_dir=manifest.dir):
            artifacts.update(_run_side_by_side(store, builds, team, cache_root))
        delta = ccache.delta(before, ccache.stats(), remote_storage=team is not None) if counting else None
    else:
        delta = None
    for what, reason in rejected.items():
        artifacts[what].miss_reason = artifacts[what].miss_reason or reason
    return artifacts, delta


def _build_plan(plan, manifest, target: Target, estimate_s, cache_root: Path, previous_library) -> BuildPlan:
    a = target.artifact
    if a.what == "lib":
        return lib_plan(manifest, plan.backend, a.lock_key, estimate_s, plan, previous_library)
    op = next(op for op in manifest.ops if op.name == a.what)
    return binding_plan(manifest, op, plan.backend, cache_root, a)


def _run_side_by_side(store, builds: dict, team, cache_root: Path) -> dict[str, Artifact]:
    if len(builds) == 1:
        (what, (target, build)), = builds.items()
        return {what: ensure(store, target, build, team)}
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    from registry.build_processes import stop_builds_of_this_process

    with ThreadPoolExecutor(max_workers=len(builds)) as pool:
        futures = {what: pool.submit(ensure, store, target, build, team) for what, (target, build) in builds.items()}
        try:
            done, pending = wait(futures.values(), return_when=FIRST_EXCEPTION)
            failed = next((f for f in done if f.exception() is not None), None)
            # The first failure is the answer: stop the builds beside it (the
            # binding takes 15-60 s) rather than wait for them. Killing their
            # compilers makes them fail at once, publishing nothing; again
            # until they end, for one that was still claiming its lock.
            while failed is not None and pending:
                stop_builds_of_this_process(cache_root)
                _, pending = wait(pending, timeout=0.2)
        except KeyboardInterrupt:
            # Ctrl-C reaches this thread only: stop the workers' compilers so their builds fail now.
            stop_builds_of_this_process(cache_root)
            raise
        if failed is not None:
            raise failed.exception()
        return {what: f.result() for what, f in futures.items()}
