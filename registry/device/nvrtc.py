"""NVRTC, in-process: found in the CUDA wheels torch installs, driven through ctypes.

No CUDA toolkit is needed: torch's wheels bring `nvidia/cu13/lib/libnvrtc.so.13`
(or `nvidia/cuda_nvrtc/lib/libnvrtc.so.12` for CUDA 12 wheels) and the CUDA
headers beside it (`cuda_fp16.h`, `cuda_bf16.h`, ...). `REGISTRY_NVRTC` names
another libnvrtc.so explicitly.

Options the registry never passes: `-pch` and `-pch-dir` (NVRTC's automatic
precompiled headers live in a shared folder, are not keyed by the content of
the headers they hold, and return old code after a header edit).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from registry.errors import RegistryError

_NVRTC_SUCCESS = 0


class NvrtcNotFoundError(RegistryError):
    def __init__(self, looked: list[str]):
        super().__init__(
            "NVRTC (libnvrtc.so) was not found; looked in: " + ", ".join(looked) + ". "
            "Install torch's CUDA wheels (they bring nvidia-cuda-nvrtc), set REGISTRY_NVRTC to a "
            "libnvrtc.so, or use compiler = \"nvcc\" in the kernel's [cuda] table."
        )


class Nvrtc:
    """One libnvrtc: its identity (what the key and status() record, read
    without loading it) and compile() (which loads it on first use: the
    library is ~100 MB, and a cached `get` must not pay for opening it)."""

    def __init__(self, library: str, include_dir: str | None, distribution: str):
        self.library = library          # resolved path of libnvrtc.so
        self.include_dir = include_dir  # the CUDA headers that came with it, if found
        self.distribution = distribution  # e.g. "nvidia-cuda-nvrtc 13.0.88", or "" when unknown
        self._lib = None

    @property
    def splits_compiles(self) -> bool:
        """Whether it takes --split-compile (NVRTC 12.4 and later), told
        from the wheel's version or the library's soname without loading it."""
        version = self.distribution.rpartition(" ")[2] if self.distribution else ""
        if not version:
            version = self.library.rpartition(".so.")[2]  # "13" of libnvrtc.so.13; "" when unversioned
        try:
            parts = tuple(int(p) for p in version.split(".")[:2])
        except ValueError:
            return False
        return parts >= (12, 4) if len(parts) == 2 else parts >= (13,)

    def identity(self) -> str:
        """The wheel's name and version, the file, its size and mtime."""
        st = os.stat(self.library)
        return (f"nvrtc ({self.distribution or 'no distribution'}) {self.library} "
                f"size={st.st_size} mtime_ns={st.st_mtime_ns}")

    @property
    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self._open().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return f"{major.value}.{minor.value}"

    def _open(self):
        if self._lib is None:
            # libnvrtc dlopens its builtins by soname: load them first by path,
            # so the wheel's folder need not be on LD_LIBRARY_PATH.
            for b in sorted(Path(self.library).parent.glob("libnvrtc-builtins.so.*")):
                ctypes.CDLL(str(b), mode=ctypes.RTLD_GLOBAL)
            lib = ctypes.CDLL(self.library, mode=ctypes.RTLD_GLOBAL)
            lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            self._lib = lib
        return self._lib

    def _check(self, result: int, what: str) -> None:
        if result != _NVRTC_SUCCESS:
            raise RegistryError(f"{what} failed: {self._open().nvrtcGetErrorString(result).decode()}")

    def compile(self, source: bytes, name: str, options: list[str], ltoir: bool = False,
                ptx: bool = False) -> tuple[bytes | None, str]:
        """(cubin or None on a compile error, NVRTC's log). ltoir: the
        program's LTO-IR instead (options with -dlto), for nvJitLink; ptx:
        its PTX (options with a virtual -arch=compute_XX)."""
        lib = self._open()
        prog = ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), source, name.encode(), 0, None, None),
                    "nvrtcCreateProgram")
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            result = lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            log = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
            text = log.value.decode(errors="replace")
            if result != _NVRTC_SUCCESS:
                return None, text
            kind = "LTOIR" if ltoir else "PTX" if ptx else "CUBIN"
            self._check(getattr(lib, f"nvrtcGet{kind}Size")(prog, ctypes.byref(size)), f"nvrtcGet{kind}Size")
            output = ctypes.create_string_buffer(size.value)
            self._check(getattr(lib, f"nvrtcGet{kind}")(prog, output), f"nvrtcGet{kind}")
            return output.raw, text
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_loaded: dict[str, Nvrtc] = {}


def _wheel_candidates() -> list[tuple[Path, Path, str]]:
    """(libnvrtc, include dir, distribution name) in the nvidia wheels' layouts."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    found = []
    for root in roots:
        for sub, soname, dist in (("cu13", "libnvrtc.so.13", "nvidia-cuda-nvrtc"),
                                  ("cuda_nvrtc", "libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12")):
            lib = root / sub / "lib" / soname
            include = root / sub / "include" if sub == "cu13" else root / "cuda_runtime" / "include"
            found.append((lib, include, dist))
    return found


def _distribution_version(lib: Path, name: str) -> str:
    """"nvidia-cuda-nvrtc 13.0.88", from the .dist-info folder in the
    site-packages holding the wheel (importlib.metadata scans all of sys.path)."""
    site = lib.parents[3]  # <site-packages>/nvidia/<sub>/lib/libnvrtc.so.N
    for info in sorted(site.glob(name.replace("-", "_") + "-*.dist-info")):
        return f"{name} {info.name[len(name) + 1:-len('.dist-info')]}"
    return ""


def load() -> Nvrtc:
    """The NVRTC this process uses (loaded once)."""
    from registry import knobs

    explicit = knobs.nvrtc_library()
    if explicit:
        candidates = [(Path(explicit), Path(explicit).resolve().parent.parent / "include", "")]
    else:
        candidates = _wheel_candidates()
    for lib, include, dist in candidates:
        if lib.is_file():
            path = str(lib.resolve())
            if path not in _loaded:
                _loaded[path] = Nvrtc(path, str(include) if (include / "cuda_fp16.h").is_file() else None,
                                      _distribution_version(lib, dist) if dist else "")
            return _loaded[path]
    raise NvrtcNotFoundError([str(lib) for lib, _, _ in candidates] or ["no nvidia wheel is installed"])
