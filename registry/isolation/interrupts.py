"""Ctrl-C during an isolated call, remembered so that it cannot be lost.

Python raises KeyboardInterrupt at the next bytecode the main thread runs
after SIGINT. Where that bytecode is a finalizer (a __del__, a weakref
callback the garbage collector runs while a worker starts) or the first line
of a ctypes callback (the proxy launcher, entered from the binding), the
exception is printed as "Exception ignored" and dropped, and the call then
waited for a hanging worker until the timeout. So while a call may take long
(a worker starting, a long wait for the reply), SIGINT goes through a
handler that first records it, then runs the handler that was there (which
raises KeyboardInterrupt as before). The wait checks the record between short
poll slices, and the outermost isolated call raises KeyboardInterrupt when a
recorded interrupt never reached it.

Armed only on those slow phases (a worker's start, a wait past its first
0.1 s slice), never on a call answered sooner: installing and restoring a
handler costs ~16 us here, a short isolated call ~30 us. The handler that was
there comes back when the outermost call ends.
"""
from __future__ import annotations

import signal
import threading


class InterruptWatch:
    def __init__(self):
        self.previous = None  # the SIGINT handler to restore; None: not armed
        self.seen = False  # SIGINT came while armed, and no call has raised it yet
        self.held = 0  # isolated calls in progress that will disarm at their end

    def arm(self) -> bool:
        """Records SIGINT from now on (main thread only; a handler that is not a
        Python function, SIG_IGN or SIG_DFL, is the user's choice and stays).
        True when this call installed the handler."""
        if self.previous is not None or threading.current_thread() is not threading.main_thread():
            return False
        current = signal.getsignal(signal.SIGINT)
        if not callable(current):
            return False
        signal.signal(signal.SIGINT, self._record)
        self.previous = current
        return True

    def _record(self, signum, frame):
        self.seen = True
        self.previous(signum, frame)

    def disarm(self) -> bool:
        """Restores the handler; True when a SIGINT came since the last disarm."""
        if self.previous is not None:
            if signal.getsignal(signal.SIGINT) == self._record:  # replaced meanwhile: keep the newer one
                signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        seen, self.seen = self.seen, False
        return seen

    def disarm_unless_held(self) -> None:
        """After a slow phase outside an isolated call's span (which disarms at its end)."""
        if not self.held:
            self.disarm()


WATCH = InterruptWatch()
