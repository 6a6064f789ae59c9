"""Rebuild a kernel whenever its files change, from a background thread.

    w = registry.watch("axpy")   # edit axpy's sources in any editor...
    ...                          # ...each save rebuilds and hot-swaps the op
    w.stop()

The watcher just calls registry.get(name) every `interval` seconds: get
returns after a few stat() calls when nothing changed, and rebuilds and
swaps the op handles in place when something did, so the op you hold runs
the new code on its next call. A failed build prints the compiler's errors
(rendered, with the offending lines) and leaves the previous code running;
the watcher then waits for the next edit instead of recompiling the same
broken source every interval.

In Jupyter the lines a watcher prints land in the output of the cell that
started it.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from registry.errors import UsageError
from registry.state import duration_text


class Watcher:
    """A running watch: `.stop()`, `.last_error` (None after a good build),
    `.builds` and `.failures` counted since it started."""

    def __init__(self, name: str, interval: float, device: str | None, out=None):
        from registry.resolve import find

        self.name, self.interval, self.device = name, interval, device
        self.kernel_dir = Path(find(name).dir)
        self.last_error: BaseException | None = None
        self.builds = self.failures = 0
        self._out = out or (lambda text: print(text, flush=True))
        self._stop = threading.Event()
        self._failed_at: tuple | None = None  # the files' fingerprint when the last build failed
        self._thread = threading.Thread(target=self._run, name=f"registry-watch-{name}", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling (a build in progress finishes first, up to `timeout`)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        error = ", last build failed" if self.last_error else ""
        return f"<registry watch {self.name} every {self.interval:g} s, {state}, {self.builds} builds{error}>"

    def _run(self) -> None:
        self.poll()  # load (or build) at once, then follow the edits
        while not self._stop.wait(self.interval):
            self.poll()

    def _fingerprint(self) -> tuple:
        # The kernel folder's files by (path, mtime, size): cheap, and only
        # used to tell "edited since the failed build" from "not yet".
        found = []
        for folder, _, files in os.walk(self.kernel_dir):
            for file in files:
                try:
                    st = os.stat(os.path.join(folder, file))
                except OSError:
                    continue
                found.append((folder, file, st.st_mtime_ns, st.st_size))
        return tuple(sorted(found))

    def poll(self) -> None:
        """One check: get, and report a build or a failure."""
        import registry
        from registry.errors import BuildError
        from registry.notebook.render import render_text

        fingerprint = self._fingerprint()
        if self._failed_at is not None and fingerprint == self._failed_at:
            return  # still the source that failed: wait for an edit
        try:
            registry.get(self.name, device=self.device)
        except BuildError as error:
            self._failed(error, fingerprint, render_text(error))
            return
        except Exception as error:  # noqa: BLE001  (a manifest typo must not kill the watcher)
            self._failed(error, fingerprint, f"{type(error).__name__}: {error}")
            return
        status = registry.status(self.name, device=self.device)
        recovered = self.last_error is not None
        self._failed_at, self.last_error = None, None
        if status.outcome == "in-process" and not recovered:
            return
        self.builds += 1
        if status.outcome == "in-process":
            self._out(f"[{time.strftime('%H:%M:%S')}] watch {self.name}: sources are back to the running build")
            return
        what = f"compiled in {duration_text(status.build_seconds)}" if status.compiled else "loaded from the cache"
        why = "; ".join(status.changes) or "first load"
        self._out(f"[{time.strftime('%H:%M:%S')}] watch {self.name}: {what} ({why})")

    def _failed(self, error: BaseException, fingerprint: tuple, text: str) -> None:
        self.last_error, self._failed_at = error, fingerprint
        self.failures += 1
        self._out(f"[{time.strftime('%H:%M:%S')}] watch {self.name}: build failed; "
                  f"the op keeps running its previous code. Fix and save to retry.\n{text}")


def watch(name: str, interval: float = 0.5, *, device: str | None = None, out=None) -> Watcher:
    """Start watching kernel `name`; returns the Watcher (call .stop() to end).
    `out` receives each report line (default: print)."""
    if interval <= 0:
        raise UsageError(f"interval must be positive seconds, not {interval!r}")
    return Watcher(name, interval, device, out)
