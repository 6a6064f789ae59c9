"""Acting on a plan's misses: the team's remote cache first, then the builds
(their recipes from recipe.py) side by side.

Imported only when something is missing: a fresh process that finds
everything cached does not pay for the build machinery."""
from __future__ import annotations

from pathlib import Path

from registry.builder import ccache
from registry.builder.artifacts import Artifact, Target, ensure, fetch_remote, plan_job
from registry.builder.recipe import binding_plan, lib_plan
from registry.builder.step import BuildPlan
from registry.remote import team_cache


def build_missing(store, plan, manifest, targets: dict, estimate_s, cache_root: Path, cuda_arch: str | None,
                  previous_library: str | None = None):
    """targets: what -> Target for each artifact the plan misses. The team's
    remote cache first (REGISTRY_REMOTE_CACHE); what is still missing builds
    under the compiler environment, side by side (the binding, with torch
    headers, is the slow one). previous_library: the kernel library loaded
    before in this process, if any. Returns (what -> Artifact, ccache counts or None)."""
    artifacts, rejected = {}, {}
    team = team_cache.current()
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
        builds = {what: (target, _build_plan(plan, manifest, target, estimate_s, cache_root, previous_library,
                                             cuda_arch))
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


def _build_plan(plan, manifest, target: Target, estimate_s, cache_root: Path, previous_library,
                cuda_arch: str | None) -> BuildPlan:
    a = target.artifact
    if a.what == "lib":
        return lib_plan(manifest, plan.backend, a.lock_key, estimate_s, plan, previous_library, cuda_arch)
    return binding_plan(manifest, plan.backend, a)


def _run_side_by_side(store, builds: dict, team, cache_root: Path) -> dict[str, Artifact]:
    if len(builds) == 1:
        (what, (target, build)), = builds.items()
        return {what: ensure(store, target, plan_job(build), team)}
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    from registry.builder.build_processes import stop_builds_of_this_process

    with ThreadPoolExecutor(max_workers=len(builds)) as pool:
        futures = {what: pool.submit(ensure, store, target, plan_job(build), team)
                   for what, (target, build) in builds.items()}
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
