"""Getting one artifact by key: cache hit, or lock -> check again -> (the
team's remote cache) -> build -> publish (-> store remotely). Never records a
failed build; never shows a half-written one."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from registry import _core, cache_cap, knobs
from registry.builder import BuildPlan, BuildResult, run_build
from registry.errors import LockTimeoutError


@dataclass
class Artifact:
    entry: object            # _core.Entry
    path: str                # the file to load
    built: BuildResult | None  # set when this call compiled it
    miss_reason: str = ""    # why a cached entry was rejected, if one was
    source: str = "cache"    # "cache", "remote" (fetched now) or "compiled"


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


def ensure(store, key, plan: BuildPlan, force: bool = False, remote=None) -> Artifact:
    """`key` is a keys.LibKey or keys.FixedKey: its artifact key may be known
    only after the build, from the files the compiler reported."""
    reason = ""
    if not force and (known := key.match()) is not None:
        hit = store.lookup(known.hex)
        if hit.entry is not None:
            return Artifact(hit.entry, _artifact_path(hit.entry), None)
        reason = hit.miss_reason
    with _locked(store.lock_path(key.lock_hex)):
        # Another process may have built (and recorded) it while we waited.
        if not force and (known := key.match()) is not None:
            hit = store.lookup(known.hex)
            if hit.entry is not None:
                return Artifact(hit.entry, _artifact_path(hit.entry), None)
        claim = None
        if remote is not None and not force:
            # One build per team: wait for another machine building this key
            # (claimed under the key known before building).
            entry, note, claim = remote.wait_or_claim(store, key.lock_hex, time.monotonic() + knobs.lock_timeout(),
                                                      find=lambda: _known_hex(key.match_remote(remote)))
            if entry is not None:
                return Artifact(entry, _artifact_path(entry), None, reason, "remote")
            reason = reason or note
        try:
            return _build(store, key, plan, remote, reason, force)
        finally:
            if claim is not None:
                claim.release()


def _known_hex(key) -> str | None:
    return None if key is None else key.hex


def _build(store, key, plan: BuildPlan, remote, reason: str, force: bool) -> Artifact:
    """Build in a staging folder, publish, record the dependencies, store
    remotely (the caller holds the key's lock)."""
    staging = Path(store.make_staging_dir())
    try:
        started_ns = time.time_ns()  # the clock file times use: a dep saved after this is suspect
        result = run_build(plan, staging)
        final = key.from_build(result.deps, started_ns)
        if force:
            store.remove(final.hex)
        entry = _core.Entry()
        entry.key, entry.kernel = final.hex, plan.kernel
        entry.backend, entry.kind = plan.backend, plan.kind
        entry.artifact, entry.build_seconds = result.artifact, result.seconds
        entry.built_at, entry.deps, entry.inputs = int(time.time()), result.deps, final.inputs
        published = store.publish(str(staging), entry)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    key.record_build()  # after publishing: a record never names what is not there yet
    if remote is not None:
        remote.store(published)  # only warns on failure
        key.share_record(remote)
    cache_cap.collect_garbage(store, keep=[published.key])  # the size cap; only warns on failure
    return Artifact(published, _artifact_path(published), result, reason, "compiled")


def _artifact_path(entry) -> str:
    return str(Path(entry.dir) / entry.artifact)


class _locked:
    """Poll a flock-based lock: Ctrl-C stays responsive and a timeout names the holder."""

    def __init__(self, path: str):
        self.path, self.lock = path, None

    def __enter__(self):
        start, timeout = time.monotonic(), knobs.lock_timeout()
        delay = 0.005
        while (lock := _core.FileLock.try_acquire(self.path)) is None:
            waited = time.monotonic() - start
            if waited > timeout:
                raise LockTimeoutError(self.path, _core.lock_holder(self.path), waited)
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        self.lock = lock
        return self

    def __exit__(self, *exc):
        self.lock.release()
        return False
