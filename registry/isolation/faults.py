"""KernelFault: a launcher that crashed, hung or faulted in its worker.

One readable paragraph: which op, kernel, dtype and backend, what happened
(the signal and what it usually means, the CUDA error, or the timeout), that
the user's process and its tensors are unaffected and the next call starts a
new worker, and what to try next. A checked call adds what the sanitizer
found (.diagnostics: file:line of the faulting access, rendered like a
compile error by registry/render.py) and the sanitizer's report (.log).
"""
from __future__ import annotations

from registry.errors import RegistryError


class KernelFault(RegistryError, RuntimeError):
    """Attributes: kernel, op, dtype, backend, what (how it ended), hang (a
    timeout), checked, access (e.g. "out-of-bounds write"), diagnostics
    (registry.errors.Diagnostic list), log (the worker's output)."""

    def __init__(self, *, kernel: str, op: str, dtype: str, backend: str, what: str, hang: bool = False,
                 checked: bool = False, access: str = "", relative: str = "", diagnostics=(), log: str = ""):
        self.kernel, self.op, self.dtype, self.backend, self.what = kernel, op, dtype, backend, what
        self.hang, self.checked, self.access, self.relative = hang, checked, access, relative
        self.diagnostics, self.log = list(diagnostics), log
        where = f" at {self.diagnostics[0].file}:{self.diagnostics[0].line}" if self.diagnostics else ""
        found = (f" The sanitizer found {access or 'an invalid access'}{where}"
                 + (f" ({relative})" if relative else "") + ".") if checked and (access or where) else ""
        protected = "your process, its tensors" + (" and its CUDA context" if backend == "cuda" else "")
        if hang:
            advice = "Fix the loop or raise the timeout; the next call starts a new worker."
        elif checked:
            advice = "Fix the access and call registry.get() again; the next call starts a new worker."
        else:
            advice = (f"The next call starts a new worker. To find the faulting line, call "
                      f"registry.get({kernel!r}, checked=True), which builds the kernel with "
                      + ("AddressSanitizer and UBSan" if backend == "cpu" else "line info and runs it under "
                         "compute-sanitizer's memcheck") + ".")
        super().__init__(
            f"{kernel}.{op} ({dtype}, {backend}) faulted in its isolated worker: {what}.{found} "
            f"Nothing is lost: {protected} keep working. {advice}")
