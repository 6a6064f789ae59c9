"""Getting one artifact, whatever builds it (a kernel library, the shared
binding, a cubin): lock -> look again -> (the team's remote cache) -> build
-> publish (-> store remotely). Never records a failed build; never shows a
half-written one. The claim and the publish are one core call each
(core/plan.h): the lock, the second look, the staging folder; the key from
the compiler's list, the entry, the dependency record. What differs per kind
is only how it is built in the staging folder (a Job)."""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from registry import _core, knobs
from registry.builder.compile import run_build
from registry.builder.step import BuildPlan, BuildResult
from registry.errors import LockTimeoutError


@dataclass
class Artifact:
    entry: object            # _core.Entry
    path: str                # the file to load
    built: BuildResult | None  # set when this call compiled it (a cubin's: cubin_build.DeviceBuild)
    miss_reason: str = ""    # why a cached entry was rejected, if one was
    source: str = "cache"    # "cache", "remote" (fetched now) or "compiled"


@dataclass
class Job:
    """One artifact's build as the driver runs it: the entry's names and a
    function building into a staging folder, which returns what a
    step.BuildResult holds (artifact, seconds, deps: the files the key covers).
    started_ns: when its inputs were read (a file saved later is not trusted
    as what was built); None: when the build starts."""
    kernel: str
    backend: str
    kind: str
    run: Callable[[Path], object]
    started_ns: int | None = None


def plan_job(plan: BuildPlan) -> Job:
    """A kernel library's or the binding's build (compile.run_build)."""
    return Job(plan.kernel, plan.backend, plan.kind, lambda staging: run_build(plan, staging))


class Target:
    """One artifact of a plan (_core.ArtifactPlan) as the builds act on it.

    key is the artifact key once known: from the plan, or for a kernel
    library whose dependency record named none, from a claim that found
    another process's build, the remote's record, or this build.
    extra_stamps is then what the record or the compiler added (for the memo);
    rekeyed says the key is not the plan's."""

    def __init__(self, artifact):
        self.artifact = artifact
        self.lock_hex = artifact.lock_key
        self.key = artifact.key
        self.extra_stamps: list = []
        self.rekeyed = False

    def _found(self, key, stamps) -> None:
        self.key, self.extra_stamps, self.rekeyed = key, list(stamps), True

    # The record travels through a team's remote cache (team_cache.py) as a small
    # file under its path in the cache, so another machine finds the same key.
    def _remote_name(self) -> str:
        return f"deps/{self.artifact.lock_key}.toml"

    def match_remote(self, team):
        """The key, else match against the record the remote holds (a kernel
        library's); a remote record that matches becomes the local one if
        there is none yet."""
        if self.key is not None or team is None or self.artifact.base is None:
            return self.key
        record = self.artifact.record_path
        found = self.artifact.match_record(record)  # written meanwhile by another process here?
        if found is None:
            data = team.get_file(self._remote_name())
            if data is None:
                return None
            fetched = f"{record}.remote.{os.getpid()}"
            os.makedirs(os.path.dirname(fetched), mode=0o700, exist_ok=True)
            try:
                _core.write_file_atomic(fetched, data)
                found = self.artifact.match_record(fetched)  # verified as a local record is
                if found is not None and not os.path.exists(record):
                    os.replace(fetched, record)
            finally:
                if os.path.exists(fetched):
                    os.unlink(fetched)
        if found is None:
            return None
        self._found(found.key, found.stamps)
        return self.key

    def share_record(self, team) -> None:
        """Stores the local record in the remote (the last writer's entries win
        there; a machine whose entry was lost builds once more)."""
        if self.artifact.base is None:
            return
        try:
            data = Path(self.artifact.record_path).read_bytes()
        except OSError:
            return
        team.put_file(self._remote_name(), data)


def fetch_remote(store, key_hex: str, remote) -> tuple[Artifact | None, str]:
    """(artifact, note) from the remote cache, under the key's build lock:
    of several processes missing the same key, one fetches and the others
    find its result in the local cache. None when the remote lacks it, is
    unavailable, or its copy was rejected (the note says why)."""
    with _locked(store.lock_path(key_hex)):
        hit = store.lookup(key_hex)
        if hit.entry is not None:
            return Artifact(hit.entry, _artifact_path(hit.entry), None), ""
        entry, note = remote.fetch(store, key_hex)
    if entry is None:
        return None, note
    return Artifact(entry, _artifact_path(entry), None, source="remote"), ""


def ensure(store, target: Target, job: Job, remote=None) -> Artifact:
    """The artifact the plan found missing: claimed under its lock, where
    another process's build may turn up; else the team's (remote), else built
    by `job` and published (and stored in the team's cache)."""
    force, reason = target.artifact.force, target.artifact.miss_reason
    claim = claim_artifact(store, target)
    if claim.hit is not None:
        # Another process built (and recorded) it while we waited.
        if target.key is None:
            target._found(claim.key, claim.extra_stamps)
        return Artifact(claim.hit, _artifact_path(claim.hit), None, reason)
    published = False
    try:
        team_claim = None
        if remote is not None and not force:
            # One build per team: wait for another machine building this key
            # (claimed under the key known before building).
            entry, note, team_claim = remote.wait_or_claim(
                store, target.lock_hex, time.monotonic() + knobs.lock_timeout(),
                find=lambda: _known_hex(target.match_remote(remote)))
            if entry is not None:
                return Artifact(entry, _artifact_path(entry), None, reason, "remote")
            reason = reason or note
        try:
            artifact = _build(store, target, job, claim, reason)
            published = True
        finally:
            if team_claim is not None:
                team_claim.release()
    finally:
        if not published:
            claim.release()
    if remote is not None:
        remote.store(artifact.entry)  # only warns on failure
        target.share_record(remote)
    return artifact


def poll(attempt, lock_path: str):
    """attempt()'s first result that is not None, tried again with a growing
    pause (5 ms to 100 ms) while another process holds the lock at
    `lock_path`: Ctrl-C stays responsive, and a timeout names the holder."""
    start, timeout, delay = time.monotonic(), knobs.lock_timeout(), 0.005
    while (result := attempt()) is None:
        waited = time.monotonic() - start
        if waited > timeout:
            raise LockTimeoutError(lock_path, _core.lock_holder(lock_path), waited)
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return result


def claim_artifact(store, target: Target):
    """The build lock's claim (a hit when another process published meanwhile)."""
    def attempt():
        claim = _core.try_claim(store, target.artifact)
        return None if claim.busy else claim

    return poll(attempt, store.lock_path(target.lock_hex))


def _known_hex(key) -> str | None:
    return None if key is None else key.hex


def _build(store, target: Target, job: Job, claim, reason: str) -> Artifact:
    """Build in the claim's staging folder and publish (the core derives the
    key from the compiler's list, publishes, records, releases the lock)."""
    staging = Path(claim.staging)
    try:
        # The clock file times use: a dep saved after this is suspect.
        started_ns = job.started_ns if job.started_ns is not None else time.time_ns()
        result = job.run(staging)
        entry = _core.Entry()
        entry.kernel, entry.backend, entry.kind = job.kernel, job.backend, job.kind
        entry.artifact, entry.build_seconds = result.artifact, result.seconds
        entry.built_at, entry.deps = int(time.time()), result.deps
        published = _core.publish_claim(store, target.artifact, claim, entry, result.deps, started_ns)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.artifact.base is not None:
        target._found(published.key, published.extra_stamps)
    return Artifact(published.entry, _artifact_path(published.entry), result, reason, "compiled")


def _artifact_path(entry) -> str:
    return str(Path(entry.dir) / entry.artifact)


class _locked:
    """A flock-based lock, polled for (poll)."""

    def __init__(self, path: str):
        self.path, self.lock = path, None

    def __enter__(self):
        self.lock = poll(lambda: _core.FileLock.try_acquire(self.path), self.path)
        return self

    def __exit__(self, *exc):
        self.lock.release()
        return False
