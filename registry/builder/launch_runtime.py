"""The launch runtime of launcher libraries (kreg/launch_runtime.cc: the
bound cubin, its module per device, kreg_launch), compiled once per
compiler into an object that every launcher library's direct build links.

Compiled with the kernel's flags, it was compiled again whenever the
force-included launcher prototypes changed (every signature edit), beside
the launcher, and the library took a link step of its own: on the H200 a
signature edit cost twice a device-code edit. As an object, the library is
one compile-and-link of the launcher source (direct.py).

The object lives under the cache's generated/ folder, named by a digest of
what it is made from: the runtime and the headers it includes (read here,
so an edit of the registry's headers gives a new object), the compiler
(path, size, mtime) and its command (command_lines.py, which every key
covers by digest). The kernel library's own key covers the runtime's text
as one of its sources (core/build_keys.cc).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from registry import _core, command_lines, knobs
from registry.builder.step import LAUNCH_RUNTIME

_HEADERS = [knobs.REGISTRY_INCLUDE / "kreg" / "launch.h", knobs.REGISTRY_INCLUDE / "kreg" / "abi.h"]


def object_path(cxx: str) -> Path:
    """Where the runtime's object for `cxx` (the compiler itself, not a
    ccache wrapper) lives in this process's cache."""
    compiler = shutil.which(cxx) or cxx
    stat = os.stat(compiler)
    fields = [("compiler", os.path.realpath(compiler)), ("compiler.stat", f"{stat.st_size} {stat.st_mtime_ns}"),
              ("command", " ".join(_command("<c++>", "<out>")))]
    fields += [(f"file:{path.name}", path.read_bytes().decode("utf-8", errors="replace"))
               for path in (LAUNCH_RUNTIME, *_HEADERS)]
    digest = _core.hash_fields_hex(fields)[:32]
    return knobs.cache_path("generated") / f"kreg_launch_runtime_{digest}.o"


def ensure_object(cxx: str) -> tuple[Path | None, str]:
    """(the object, "") once it exists, compiling it on the first use;
    (None, the compiler's command and output) when the compile fails.
    Published by a rename: processes that compile it side by side each
    write a whole file, and the last one wins."""
    path = object_path(cxx)
    if path.is_file():
        return path, ""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    command = _command(cxx, str(partial))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        return None, " ".join(command) + "\n" + done.stdout + done.stderr
    os.replace(partial, path)
    return path, ""


def _command(cxx: str, out: str) -> list[str]:
    return command_lines.launch_runtime_compile(cxx, str(knobs.REGISTRY_INCLUDE), str(LAUNCH_RUNTIME), out)
