"""Finding and stopping the compilers of a build that was interrupted.

load() runs ninja through subprocess.run, which on KeyboardInterrupt SIGKILLs
ninja only. Ninja starts each compiler in its own process group, so when the
SIGINT went to the Python process alone (`kill -INT`, some notebook
front-ends) the compilers outlive it, orphaned, still writing into the
staging folder. So an interrupted build kills every process of this user
whose working directory is inside its staging folder (ninja runs its jobs
there): nothing else has a reason to be in a private staging folder.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _cwd_inside(pid: int, folder: str) -> bool:
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:  # gone, or not ours to inspect
        return False
    return cwd == folder or cwd.startswith(folder + "/")


def processes_in(build_dir: str | os.PathLike) -> list[int]:
    """Pids (other than this process) whose working directory is in build_dir."""
    folder = str(Path(build_dir).resolve())
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:  # no /proc (not Linux): nothing we can find
        return []
    return [pid for pid in pids if pid != me and _cwd_inside(pid, folder)]


def kill_build_processes(build_dir: str | os.PathLike, grace_s: float = 2.0) -> list[int]:
    """SIGTERM, then SIGKILL after grace_s, every process working in build_dir.
    Returns the pids found. Safe to call when there are none."""
    folder = str(Path(build_dir).resolve())
    found = processes_in(folder)
    alive = found
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [pid for pid in alive if _signal(pid, sig)]
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in alive if _cwd_inside(pid, folder)]
        if not alive:
            break
    return found


def stop_builds_of_this_process(cache_root: str | os.PathLike) -> list[int]:
    """Kill the compilers of every build this process runs, wherever it runs
    them: the staging folders <cache>/v1/tmp/<pid>-* (cache_store.h). For the
    main thread on Ctrl-C while worker threads build: the interrupt reaches
    only the main thread, and killing the workers' compilers makes their
    load() fail at once instead of finishing (and publishing) the builds."""
    found = []
    from registry import knobs

    for folder in knobs.cache_path("tmp", cache_root).glob(f"{os.getpid()}-*"):
        found += kill_build_processes(folder)
    return found


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
