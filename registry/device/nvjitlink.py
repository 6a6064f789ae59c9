"""nvJitLink, the CUDA device linker as a library: LTO-IR units (NVRTC
-dlto) linked into one cubin, NVVM optimizing across them (device/lto_link.py).

Found beside the NVRTC the registry uses (torch's CUDA wheels bring both:
CUDA 13's in one lib folder, CUDA 12's in nvidia/nvjitlink/lib), loaded on
the first link; it must be as new as NVRTC, whose LTO-IR it reads. Its entry points are
versioned symbols: the header maps nvJitLinkCreate to
__nvJitLinkCreate_<major>_0, so they are looked up by that name.
"""
from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

from registry.errors import BuildEnvironmentError, RegistryError

_SUCCESS = 0
_INPUT_LTOIR = 3  # nvJitLinkInputType's NVJITLINK_INPUT_LTOIR


class NvJitLink:
    """One libnvJitLink: its identity (for keys, read without loading it) and link()."""

    def __init__(self, library: str, distribution: str):
        self.library, self.distribution = library, distribution
        self.major = Path(library).name.rpartition(".so.")[2].split(".")[0]
        self._lib = None

    def identity(self) -> str:
        st = os.stat(self.library)
        return (f"nvjitlink ({self.distribution or 'no distribution'}) {self.library} "
                f"size={st.st_size} mtime_ns={st.st_mtime_ns}")

    def _fn(self, name: str):
        if self._lib is None:
            self._lib = ctypes.CDLL(self.library)
        return getattr(self._lib, f"__{name}_{self.major}_0")

    def link(self, units: list[tuple[str, bytes]], options: list[str]) -> tuple[bytes | None, str, dict]:
        """(the cubin or None on a link error, the error and info logs
        (ptxas's notes are in the info log), its phases in seconds: "NVVM
        Optimizer" (nvJitLink's "create PTX") and "PTX Translation" (the
        rest)). units: (name, LTO-IR) pairs; options: e.g. -arch=sm_90a -lto."""
        handle = ctypes.c_void_p()
        opts = [*options, "-time"]
        self._check(self._fn("nvJitLinkCreate")(ctypes.byref(handle), len(opts),
                                                (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])),
                    "nvJitLinkCreate")
        try:
            for name, data in units:
                self._check(self._fn("nvJitLinkAddData")(handle, _INPUT_LTOIR, data, ctypes.c_size_t(len(data)),
                                                         name.encode()), f"nvJitLinkAddData of {name}")
            result = self._fn("nvJitLinkComplete")(handle)
            errors, info = (self._log(handle, what) for what in ("Error", "Info"))
            phases = _phases(info)
            log = _without_timing(errors) + _without_timing(info)
            if result != _SUCCESS:
                return None, log or f"nvJitLink failed ({result}) and said nothing", phases
            size = ctypes.c_size_t()
            self._check(self._fn("nvJitLinkGetLinkedCubinSize")(handle, ctypes.byref(size)),
                        "nvJitLinkGetLinkedCubinSize")
            cubin = ctypes.create_string_buffer(size.value)
            self._check(self._fn("nvJitLinkGetLinkedCubin")(handle, cubin), "nvJitLinkGetLinkedCubin")
            return cubin.raw, log, phases
        finally:
            self._fn("nvJitLinkDestroy")(ctypes.byref(handle))

    def _log(self, handle, what: str) -> str:
        size = ctypes.c_size_t()
        self._check(self._fn(f"nvJitLinkGet{what}LogSize")(handle, ctypes.byref(size)), f"nvJitLinkGet{what}LogSize")
        text = ctypes.create_string_buffer(size.value + 1)
        self._check(self._fn(f"nvJitLinkGet{what}Log")(handle, text), f"nvJitLinkGet{what}Log")
        return text.value.decode(errors="replace")

    @staticmethod
    def _check(result: int, what: str) -> None:
        if result != _SUCCESS:
            raise RegistryError(f"{what} failed: nvJitLink error {result}")


def _phases(info: str) -> dict[str, float]:
    """-time's lines ("nvJitLinkComplete time to create PTX: 8870.1 ms") as NVRTC's phase names."""
    ms = dict(re.findall(r"nvJitLinkComplete time to (create PTX|finish): ([\d.]+)", info))
    phases = {}
    if "create PTX" in ms:
        phases["NVVM Optimizer"] = float(ms["create PTX"]) / 1e3
    if "finish" in ms:
        phases["PTX Translation"] = float(ms["finish"]) / 1e3
    return phases


def _without_timing(log: str) -> str:
    """-time's lines ("nvJitLinkComplete time to finish: ...", and a split
    link's "nvJitLink time until Complete: ...") are phases, not messages."""
    return "".join(line for line in log.splitlines(keepends=True)
                   if not line.startswith(("nvJitLinkComplete time", "nvJitLink time until")))


_loaded: dict[str, NvJitLink] = {}  # by the NVRTC library it was found beside: looked for once


def load(nvrtc_library: str) -> NvJitLink:
    """The nvJitLink beside `nvrtc_library` (the same wheels' lib folder, or a toolkit's lib64)."""
    if nvrtc_library in _loaded:
        return _loaded[nvrtc_library]
    folder = Path(nvrtc_library).parent
    # CUDA 13's wheels share nvidia/cu13/lib; CUDA 12's put each library in its own nvidia/<name>/lib.
    found = sorted(folder.glob("libnvJitLink.so.*")) or sorted(folder.parent.parent.glob("nvjitlink/lib/libnvJitLink.so.*"))
    if not found:
        raise BuildEnvironmentError(
            f"[cuda] link_sources need nvJitLink, and there is no libnvJitLink.so beside NVRTC in {folder}: "
            "pip install nvidia-nvjitlink (the CUDA version of torch's wheels), or move the link_sources into "
            "device_sources")
    from registry.device.nvrtc import _distribution_version

    try:
        distribution = _distribution_version(found[-1], "nvidia-nvjitlink")
    except IndexError:  # not inside a wheel's site-packages layout (a toolkit's lib64)
        distribution = ""
    _loaded[nvrtc_library] = NvJitLink(str(found[-1].resolve()), distribution)
    return _loaded[nvrtc_library]
