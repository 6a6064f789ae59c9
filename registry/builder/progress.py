"""Progress for a build, and clean-up when one is interrupted.

    with build_progress(plan.kernel, plan.describe(), estimate_s, build_dir=staging):
        cpp_extension.load(...)

A build runs synchronously in the calling thread (torch's load() waits on
ninja), so the progress comes from a timer thread: nothing shows for the
first SHOW_AFTER_S seconds (a cache-fast build stays silent), then a bar
shows the elapsed time against the estimate, usually how long the previous
build of that artifact took: in a notebook an output of the cell replaced in
place, in a terminal a tqdm line (progress_display.py says why they differ).

Interrupts: with `build_dir` given, leaving the block by an exception stops
the compilers still running in that folder (build_processes.py says why they
can outlive the interrupt and how they are found).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time

from registry.builder.build_processes import kill_build_processes
from registry.builder.progress_display import in_notebook, open_bar

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

    def __init__(self, kernel: str, what: str, estimate_s: float | None, show: bool, started: float | None = None):
        super().__init__(name=f"registry-progress-{kernel}", daemon=True)
        self.kernel, self.what, self.estimate_s, self.show = kernel, what, estimate_s, show
        self.start_time = time.monotonic() if started is None else started
        self.done = threading.Event()
        self.bar = None
        self.lock = threading.Lock()
        self.detail = ""  # set by the block: where the time went, appended to the final label

    def run(self) -> None:
        if self.done.wait(max(0.0, SHOW_AFTER_S - (time.monotonic() - self.start_time))) or not self.show:
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
            return head + f"{outcome} after {elapsed:.1f} s" + (f" ({self.detail})" if self.detail else "")
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
def build_progress(kernel: str, what: str, estimate_s: float | None = None, *, build_dir: str | os.PathLike | None = None,
                   started: float | None = None):
    """Show progress while the block runs longer than SHOW_AFTER_S; close the
    bar on any exit. With `build_dir`, an exception (KeyboardInterrupt
    included) also stops every compiler still running in that folder.
    `started`: when the build began (time.monotonic()), if before the block
    (see wait_for_build). The block may set the yielded object's `detail`
    (e.g. the compiler's phases): the final label shows it."""
    ticker = _Ticker(kernel, what, estimate_s, _should_show(), started)
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


def wait_for_build(process, kernel: str, what: str, estimate_s: float | None = None, *,
                   build_dir: str | os.PathLike | None = None) -> tuple[str, str]:
    """process.communicate() under build_progress, whose timer thread starts
    only if the build outlasts SHOW_AFTER_S: a build faster than that (a
    one-file edit, ~0.1-0.2 s) starts no thread, whose start costs 0.2 ms
    and on a busy machine several. Any exception stops the process and the
    compilers in `build_dir`, as build_progress does."""
    started = time.monotonic()
    try:
        try:
            return process.communicate(timeout=SHOW_AFTER_S)
        except subprocess.TimeoutExpired:
            pass
        with build_progress(kernel, what, estimate_s, build_dir=build_dir, started=started):
            return process.communicate()
    except BaseException:
        process.kill()
        process.wait()
        if build_dir is not None:
            kill_build_processes(build_dir)
        raise
