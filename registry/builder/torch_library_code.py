"""Hand-written torch op registration in a kernel's sources, refused before
the build.

A lab's binding may define its ops itself (TORCH_LIBRARY(lab, m) { m.def(...) }
with TORCH_LIBRARY_IMPL). The registry registers a kernel's ops itself, from
the manifest; that code would register its own as soon as the library is
loaded, for the life of the process (torch cannot unregister them), and
abort the process on the next load of the same namespace. So it is refused
here, before anything is compiled or loaded, and the error says what replaces
it: binding = "torch-library", with namespace = "<lab>" to keep torch.ops.<lab>.
"""
from __future__ import annotations

import re
from pathlib import Path

_REGISTRATION = re.compile(r"^[ \t]*(?P<macro>TORCH_LIBRARY(?:_FRAGMENT|_IMPL)?)\s*\(\s*(?P<namespace>\w+)",
                           re.MULTILINE)


def refuse_hand_written_library(manifest, backend: str) -> None:
    """Raises HandWrittenLibraryError naming the file, line and namespace of
    the first TORCH_LIBRARY block in the sources this build compiles."""
    section = manifest.cuda if backend == "cuda" else manifest.cpu
    files = ([manifest.binding_source] if manifest.binding == "pybind" else []) + list(section.sources)
    for relative in files:
        path = Path(manifest.dir) / relative
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue  # the build reports a file it cannot read
        match = _REGISTRATION.search(text)
        if match is None:
            continue
        line = text.count("\n", 0, match.start()) + 1
        namespace = match["namespace"]
        from registry.errors import HandWrittenLibraryError

        raise HandWrittenLibraryError(
            f"kernel {manifest.name!r}: {path}:{line} registers torch ops itself ({match['macro']}({namespace}, ...)); "
            f"the registry registers a kernel's ops from kernel.toml, and this code, once loaded, would stay "
            f"registered for the life of the process. Nothing was built or registered. Remove the TORCH_LIBRARY "
            f"and TORCH_LIBRARY_IMPL blocks, export a launcher per dtype (kreg/abi.h), and set "
            f"binding = \"torch-library\" with namespace = \"{namespace}\" in {manifest.file}: the ops are then "
            f"torch.ops.{namespace}.<op> (README.md, \"Moving a lab\").")
