"""The cubin's part in a get: one more artifact beside the kernel library and
the binding (a kind of resolve.py's APART table), which resolve.resolve then
treats as it treats them (pinned, loaded, recorded, shown in the status as
artifacts["device"]).

What differs is only when it is built. Its key is not the plan's (the core's
plan keys the host side; the cubin's key covers the bytes the device compiler
is given, cubin_build.py), and a device-only edit leaves the host keys alone:
then the cubin is all there is to do, and it is done at once. When the host
side misses too (a new or renamed kernel, a launcher edit), the cubin
compiles on a thread beside those builds: NVRTC runs through ctypes, which
releases the GIL, and nvcc in a subprocess, so both really overlap.
"""
from __future__ import annotations

import threading

from registry import environment


def start(manifest, plan, store, env: dict, cache_root, *, rebuild: bool, remote, host_misses: bool):
    """The cubin of a kernel whose device code has its own compiler (the
    manifest's [cuda] compiler: "nvrtc" or "nvcc-cubin"), as a job whose
    result() is its cubin_build.DeviceArtifact. remote: the team cache or None."""
    from registry.device import cubin_build

    compiler = cubin_build.device_compiler(manifest)  # here: the host build sets CXX etc. for its run

    def cubin():
        return cubin_build.ensure(store, manifest, env.get("env.cuda_arch"), plan.memo,
                                   trust_memo=plan.memo_vouched, force=rebuild, compiler=compiler, remote=remote)

    if not host_misses:
        return _Done(cubin())
    job = _Beside(cubin)
    if environment.cuda_available(cache_root):  # memoized per machine; no GPU: nothing to warm up
        from registry.device import driver_module

        driver_module.warm_up_context()
    return job


def status_line(cubin) -> str:
    """registry.status's device line: the compiler and the cubin's key; for a
    cubin this get compiled, where the compile's time went when the compiler
    says (front end, NVVM, ptxas: cubin_build.phase_text)."""
    line = f"{cubin.compiler.identity()}, cubin key {cubin.key}"
    if cubin.built is not None and cubin.built.phases:
        line += f"; compiled in {cubin.built.seconds:.1f} s: {cubin.built.phases}"
    return line


class _Done:
    """A result there already: the cubin built (or found) at once."""

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value


class _Beside:
    """A call run on a thread beside the caller's work; result() joins it and
    returns its value or raises its exception."""

    def __init__(self, fn):
        self._value, self._error = None, None
        self._thread = threading.Thread(target=self._run, args=(fn,), name="kreg-device-build", daemon=True)
        self._thread.start()

    def _run(self, fn) -> None:
        try:
            self._value = fn()
        except BaseException as error:  # handed to the caller by result()
            self._error = error

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
