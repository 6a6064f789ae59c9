"""Progress for a build, and clean-up when one is interrupted.

    with build_progress(plan.kernel, plan.describe(), estimate_s, build_dir=staging):
        cpp_extension.load(...)

A build runs synchronously in the calling thread (torch's load() waits on
ninja), so the progress comes from a timer thread: nothing shows for the
first SHOW_AFTER_S seconds (a cache-fast build stays silent), then a bar
shows the elapsed time against the estimate, usually how long the previous
build of that artifact took: in a notebook an output of the cell replaced in
place, in a terminal a tqdm line (progress_display.py says why they differ).

Interrupts: load() runs ninja through subprocess.run, which on
KeyboardInterrupt SIGKILLs ninja only. Ninja starts each compiler in its own
process group, so when the SIGINT went to the Python process alone (`kill
-INT`, some notebook front-ends) the compilers outlive it, orphaned, still
writing into the staging folder. With `build_dir` given, leaving the block
by an exception kills every process of this user whose working directory is
inside that folder (ninja runs its jobs there): nothing else has a reason to
be in a private staging folder.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

from registry.progress_display import in_notebook, open_bar

SHOW_AFTER_S = 0.5   # builds faster than this show nothing
REFRESH_S = 0.25


def _should_show() -> bool:
    # A log file or a CI pipe would collect hundreds of carriage-return frames.
    if in_notebook():
        return True
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


class _Ticker(threading.Thread):
    """Shows and refreshes the bar until told to stop."""

    def __init__(self, kernel: str, what: str, estimate_s: float | None, show: bool):
        super().__init__(name=f"registry-progress-{kernel}", daemon=True)
        self.kernel, self.what, self.estimate_s, self.show = kernel, what, estimate_s, show
        self.start_time = time.monotonic()
        self.done = threading.Event()
        self.bar = None
        self.lock = threading.Lock()

    def run(self) -> None:
        if self.done.wait(SHOW_AFTER_S) or not self.show:
            return
        with self.lock:
            if self.done.is_set():
                return
            elapsed = time.monotonic() - self.start_time
            self.bar = open_bar(self._label(elapsed), self._fraction(elapsed))
        while not self.done.wait(REFRESH_S):
            with self.lock:
                if self.bar is not None:
                    elapsed = time.monotonic() - self.start_time
                    self.bar.update(self._label(elapsed), self._fraction(elapsed))

    def _label(self, elapsed: float, outcome: str = "") -> str:
        head = f"building {self.what} of {self.kernel}: "
        if outcome:
            return head + f"{outcome} after {elapsed:.1f} s"
        if not self.estimate_s:
            return head + f"{elapsed:.1f} s"
        late = " (longer than the last build)" if elapsed > self.estimate_s else ""
        return head + f"{elapsed:.1f} s of ~{self.estimate_s:.1f} s{late}"

    def _fraction(self, elapsed: float) -> float | None:
        # Without an estimate there is no fraction, only the elapsed time.
        if not self.estimate_s:
            return None
        return min(elapsed / self.estimate_s, 0.99)  # never full while still building

    def finish(self, outcome: str) -> float:
        self.done.set()
        with self.lock:
            bar, self.bar = self.bar, None
        elapsed = time.monotonic() - self.start_time
        if bar is not None:
            fraction = self._fraction(elapsed)
            if outcome == "done" and fraction is not None:
                fraction = 1.0
            bar.close(self._label(elapsed, outcome), fraction)
        self.join(timeout=1.0)
        return elapsed


@contextlib.contextmanager
def build_progress(kernel: str, what: str, estimate_s: float | None = None, *, build_dir: str | os.PathLike | None = None):
    """Show progress while the block runs longer than SHOW_AFTER_S; close the
    bar on any exit. With `build_dir`, an exception (KeyboardInterrupt
    included) also stops every compiler still running in that folder."""
    ticker = _Ticker(kernel, what, estimate_s, _should_show())
    ticker.start()
    try:
        yield ticker
    except BaseException as error:
        ticker.finish("interrupted" if isinstance(error, KeyboardInterrupt) else "failed")
        if build_dir is not None:
            kill_build_processes(build_dir)
        raise
    else:
        ticker.finish("done")


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
    for folder in (Path(cache_root) / "v1" / "tmp").glob(f"{os.getpid()}-*"):
        found += kill_build_processes(folder)
    return found


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
