"""The NVRTC compile server: one long-lived process that keeps precompiled
headers of kernel preludes ([cuda] prelude, device/nvrtc_pch.py).

Why a process: NVRTC's precompiled header lives in a heap at a fixed address
of the process that made it; a PCH file is only good in that process. A
notebook's `get`s come and go, so the PCH is kept here, across them.

Run as `python -E -s -S pch_server.py LIBNVRTC IDLE_SECONDS` (stdlib only: no
registry, no torch). Requests and replies are pickled dicts, each preceded by
its length (8 bytes, little-endian), on stdin / stdout. The server exits when
stdin closes (its parent died) or after IDLE_SECONDS without a request.

A request {"unit", "name", "options", "prelude_key", "pch_path", "time_path",
"ltoir"} compiles the unit to a cubin (to LTO-IR when "ltoir" is true: options
with -dlto, for nvJitLink, device/lto_link.py); the reply is {"cubin", "log", "pch", "seconds",
"cpu_seconds", "phases", "pid"}: "phases" is NVRTC's own account (--time: front end, NVVM,
PTX translation, in seconds), and
"pch" says what happened to the prelude: "used" (this key's PCH was loaded),
"created" (made now: the first compile of this prelude content), "heap" (the
PCH heap was too small: enlarged, made at the next compile) or "none" (NVRTC
declined). The client names each prelude content by prelude_key and never
reuses a key for other bytes: NVRTC itself does not check that the headers a
PCH was made from are unchanged (measured: an edited header kept the old PCH).
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import pickle
import select
import struct
import sys
import time

_SUCCESS, _HEAP_EXHAUSTED = 0, 14
# The CUTLASS GEMM's prelude needed 2.9 GB (bench/results/gemm_edit_loop-cpu.md):
# a smaller heap makes its first compile fail to keep the PCH and compile twice.
DEFAULT_HEAP_BYTES = 4 << 30
# A CUTLASS prelude's PCH is ~3 GB on disk: the server keeps the last few
# (a prelude edit and its revert both stay fast), not one per edit.
KEPT_PCHS = 3
# NVRTC says `"<unit>": using precompiled header file "<pch>"` when it loaded
# it; otherwise it warns why not (another command line, another heap).
_USED = "using precompiled header file"


def read_message(stream):
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


def write_message(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


class Server:
    def __init__(self, library: str):
        for builtins in sorted(glob.glob(os.path.join(os.path.dirname(library), "libnvrtc-builtins.so.*"))):
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        self.heap = 0
        self.wanted_heap = DEFAULT_HEAP_BYTES
        self.pchs: dict[str, str] = {}  # prelude key -> PCH file made in this process, oldest use first

    def _check(self, result: int, what: str) -> None:
        if result != _SUCCESS:
            raise RuntimeError(f"{what} failed: {self.lib.nvrtcGetErrorString(result).decode()}")

    def compile(self, request: dict) -> dict:
        start, cpu_start = time.perf_counter(), time.process_time()
        key, pch_path = request["prelude_key"], request["pch_path"]
        have = self.pchs.get(key)
        options = list(request["options"]) + [f"--time={request['time_path']}"]
        if have is not None and os.path.isfile(have):
            self.pchs[key] = self.pchs.pop(key)  # the most recently used last
            options.append(f"--use-pch={have}")
        else:
            if self.heap != self.wanted_heap:
                self._check(self.lib.nvrtcSetPCHHeapSize(ctypes.c_size_t(self.wanted_heap)), "nvrtcSetPCHHeapSize")
                self.heap = self.wanted_heap
            options.append(f"--create-pch={pch_path}")
        lib, prog = self.lib, ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), request["unit"], request["name"].encode(), 0, None,
                                           None), "nvrtcCreateProgram")
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            result = lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            log = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
            text = log.value.decode(errors="replace")
            pch = self._pch_outcome(prog, key, pch_path, have, text)
            # What it did with the PCH is in "pch"; the log keeps the diagnostics only.
            text = "".join(line for line in text.splitlines(keepends=True)
                           if not line.rstrip().endswith(f'precompiled header file "{pch_path}"')
                           and not line.rstrip().endswith(f'precompiled header file "{have}"'))
            cubin = None
            if result == _SUCCESS:
                kind = "LTOIR" if request.get("ltoir") else "CUBIN"
                self._check(getattr(lib, f"nvrtcGet{kind}Size")(prog, ctypes.byref(size)), f"nvrtcGet{kind}Size")
                buffer = ctypes.create_string_buffer(size.value)
                self._check(getattr(lib, f"nvrtcGet{kind}")(prog, buffer), f"nvrtcGet{kind}")
                cubin = buffer.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return {"cubin": cubin, "log": text, "pch": pch, "seconds": time.perf_counter() - start,
                "cpu_seconds": time.process_time() - cpu_start, "phases": read_phases(request["time_path"]),
                "pid": os.getpid()}

    def _pch_outcome(self, prog, key: str, pch_path: str, had: str | None, log: str) -> str:
        if had is not None:
            if _USED not in log:
                del self.pchs[key]  # not taken: made again next time
                return "none"
            return "used"
        status = self.lib.nvrtcGetPCHCreateStatus(prog)
        if status == _SUCCESS and os.path.isfile(pch_path):
            self.pchs[key] = pch_path
            while len(self.pchs) > KEPT_PCHS:
                oldest = next(iter(self.pchs))
                with contextlib.suppress(OSError):
                    os.remove(self.pchs.pop(oldest))
            return "created"
        if status == _HEAP_EXHAUSTED:
            required = ctypes.c_size_t()
            self.lib.nvrtcGetPCHHeapSizeRequired(prog, ctypes.byref(required))
            self.wanted_heap = max(self.wanted_heap, required.value + (required.value >> 3))
            return "heap"
        return "none"


def read_phases(path: str) -> dict[str, float]:
    """NVRTC's --time table ("file, phase, value, ms" rows) as phase -> seconds."""
    phases: dict[str, float] = {}
    try:
        with open(path) as f:
            rows = [line.split(",") for line in f.read().splitlines()[1:]]
        os.remove(path)
    except OSError:
        return phases
    for row in rows:
        if len(row) == 4 and row[3].strip() == "ms":
            name = row[1].strip()
            phases[name] = phases.get(name, 0.0) + float(row[2]) / 1e3
    return phases


def serve(library: str, idle_seconds: float) -> None:
    server = Server(library)
    # Replies get their own descriptor; anything the libraries print goes to stderr.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        ready, _, _ = select.select([stdin], [], [], idle_seconds)
        if not ready:
            return  # idle: the next compile starts a new server
        request = read_message(stdin)
        if request is None:
            return  # the parent closed the pipe (or died)
        try:
            reply = server.compile(request)
        except Exception as error:  # an NVRTC API failure: the client raises it
            reply = {"error": str(error), "pid": os.getpid()}
        write_message(stdout, reply)


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]))
