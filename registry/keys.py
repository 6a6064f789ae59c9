"""The content keys of one kernel: its library, and each op's binding.

The kernel-lib key covers the manifest, every source, the scanned include
closure, the flags and the build environment (the *base key*), plus the
files the compiler read beyond the scan (an include spelled through a
macro), found through the base key's dependency record in the cache
(core/dep_record.h). Any process can reconstruct it from content alone.
A binding key covers only what the generated binding depends on: the op
signature, the backend, the template version and the environment.
"""
from __future__ import annotations

import os
from pathlib import Path

from registry import _core

REGISTRY_INCLUDE = Path(__file__).resolve().parent / "include"


def include_dirs(manifest) -> list[str]:
    return [manifest.dir, *(str(Path(manifest.dir) / d) for d in manifest.include_dirs), str(REGISTRY_INCLUDE)]


LAUNCH_RUNTIME = REGISTRY_INCLUDE / "kreg" / "launch_runtime.cc"


def uses_nvrtc(manifest, backend: str) -> bool:
    """Device code through NVRTC: `sources` are then host launchers only."""
    return backend == "cuda" and manifest.cuda.compiler == "nvrtc"


def backend_spec(manifest, backend: str):
    return manifest.cuda if backend == "cuda" else manifest.cpu


def kernel_sources(manifest, backend: str) -> list[str]:
    spec = backend_spec(manifest, backend)
    sources = [str(Path(manifest.dir) / s) for s in spec.sources]
    if uses_nvrtc(manifest, backend):
        sources.append(str(LAUNCH_RUNTIME))  # kreg_launch, bound to the NVRTC-built module
    if manifest.binding == "pybind":
        sources.append(str(Path(manifest.dir) / manifest.binding_source))
    return sources


def nvcc_flags(manifest) -> list[str]:
    """What nvcc gets from the manifest: the top-level cflags (documented as
    applying to every unit of every backend, and covered by the key) and then
    [cuda] cflags. nvcc passes the ones it does not know (-fno-math-errno, say)
    on to the host compiler instead of failing."""
    if not manifest.cflags:
        return list(manifest.cuda.cflags)
    return ["-forward-unknown-to-host-compiler", *manifest.cflags, *manifest.cuda.cflags]


def _label(path: str, manifest) -> str:
    """Paths in key inputs are relative where possible, so a checkout moved to
    another folder keeps its keys' readable names (content still decides)."""
    p = Path(path)
    for base, prefix in ((Path(manifest.dir), ""), (REGISTRY_INCLUDE, "registry/include/")):
        try:
            return prefix + str(p.relative_to(base))
        except ValueError:
            pass
    return str(p)


def kernel_files(manifest, backend: str) -> tuple[list[str], list[str]]:
    """(every file the scan finds the kernel library depends on, unresolved includes)."""
    sources = kernel_sources(manifest, backend)
    headers = [str(Path(manifest.dir) / h) for h in manifest.headers]
    closure = _core.scan_include_closure(sources + headers, include_dirs(manifest))
    files = set(closure.files) | {manifest.file}
    return sorted(files), list(closure.unresolved)


def built_directly(manifest, backend: str) -> bool:
    """Torch-free libraries the registry compiles itself (direct_build.py):
    CPU kernel libraries and the host launchers of NVRTC device code."""
    return manifest.binding != "pybind" and (backend == "cpu" or uses_nvrtc(manifest, backend))


# What a directly built library does not depend on: it includes no torch or Python header.
_NOT_DIRECT_INPUTS = ("env.torch", "env.torch_cxx11_abi", "env.python", "env.cuda", "toolchain.nvcc",
                      "toolchain.pytorch_nvcc", "toolchain.nvcc_host_cc", "env.cuda_arch")


def kernel_lib_key(manifest, backend: str, files: list[str], env: dict[str, str]):
    kind = "module" if manifest.binding == "pybind" else "kernel-lib"
    kb = _core.KeyBuilder()
    kb.add("kernel", manifest.name).add("backend", backend).add("kind", kind)
    for path in files:
        kb.add_file(_label(path, manifest), path)
    spec = backend_spec(manifest, backend)
    kb.add_list("flags.cflags", list(manifest.cflags))
    kb.add_list(f"flags.{backend}", list(spec.cflags))
    kb.add_list("flags.ldflags", list(manifest.ldflags))
    kb.add_list("include_dirs", list(manifest.include_dirs))
    if uses_nvrtc(manifest, backend):
        kb.add("device_compiler", "nvrtc")  # host launchers only; the cubin has its own key
    direct = built_directly(manifest, backend)
    if direct:
        from registry.direct_build import DIRECT_RECIPE

        kb.add("builder", DIRECT_RECIPE)
    for name, value in env.items():
        if not (direct and name in _NOT_DIRECT_INPUTS):
            kb.add(name, value)
    return kb.finish()


class LibKey:
    """The kernel library's key, from content alone.

    The base key names a dependency record in the cache; `match()` gives the
    artifact key of a recorded build whose extra files all still have their
    digests, and `from_build()` derives it from the compiler's dependency
    list after a build, which `record_build()` then adds to the record.
    `stamps` covers every file the key depends on (for the memo's fast path);
    the scanned ones are stamped before hashing, so a file saved during the
    build looks changed next time.
    """

    def __init__(self, store, manifest, backend: str, env: dict[str, str]):
        self.scanned, self.unresolved = kernel_files(manifest, backend)
        self._scanned_stamps = list(_core.StampSet(self.scanned).stamps)
        self.base = kernel_lib_key(manifest, backend, self.scanned, env)
        self.lock_hex = self.base.hex  # one build at a time per scanned content
        self._record = store.deps_path(self.base.hex)
        self._labels = _core.DepLabels([("", manifest.dir), ("registry/include/", str(REGISTRY_INCLUDE))])
        self._extra_stamps, self._entry = [], None
        self.key = None  # the artifact key, once known

    @property
    def stamps(self) -> list:
        return self._scanned_stamps + self._extra_stamps

    def match(self):
        found = _core.match_dep_record(self._record, self.base, self._labels)
        if found is not None:
            self.key, self._extra_stamps = found.key, list(found.stamps)
        return self.key if found is not None else None

    def from_build(self, reported: list[str], build_started_ns: int):
        deps = _core.deps_from_build(self.base, self._labels, reported, self.scanned, build_started_ns)
        self.key, self._extra_stamps, self._entry = deps.key, list(deps.stamps), deps.entry
        return self.key

    def record_build(self) -> None:
        if self._entry is not None:
            _core.add_dep_entry(self._record, self.base, self._entry)

    # The record travels through a team's remote cache (remote.py) as a small
    # file under its path in the cache, so another machine finds the same key.
    def _remote_name(self) -> str:
        return f"deps/{self.base.hex}.toml"

    def match_remote(self, team):
        """match(), else match against the record the remote holds; a remote
        record that matches becomes the local one if there is none yet."""
        if self.match() is not None or team is None:
            return self.key
        data = team.get_file(self._remote_name())
        if data is None:
            return None
        fetched = f"{self._record}.remote.{os.getpid()}"
        os.makedirs(os.path.dirname(fetched), mode=0o700, exist_ok=True)
        try:
            _core.write_file_atomic(fetched, data)
            found = _core.match_dep_record(fetched, self.base, self._labels)  # verified as a local record is
            if found is None:
                return None
            self.key, self._extra_stamps = found.key, list(found.stamps)
            if not os.path.exists(self._record):
                os.replace(fetched, self._record)
            return self.key
        finally:
            if os.path.exists(fetched):
                os.unlink(fetched)

    def share_record(self, team) -> None:
        """Stores the local record in the remote (the last writer's entries win
        there; a machine whose entry was lost builds once more)."""
        try:
            data = Path(self._record).read_bytes()
        except OSError:
            return
        team.put_file(self._remote_name(), data)


class FixedKey:
    """A key known before building (a binding's, or one the memo vouches for),
    with LibKey's interface."""

    unresolved: list[str] = []

    def __init__(self, key, stamps=()):
        self.key, self.lock_hex, self.stamps = key, key.hex, list(stamps)

    def match(self):
        return self.key

    def from_build(self, reported: list[str], build_started_ns: int):
        return self.key

    def record_build(self) -> None:
        pass

    def match_remote(self, team):
        return self.key

    def share_record(self, team) -> None:
        pass


def binding_namespace(signature, backend: str) -> str:
    digest = _core.hash_fields_hex(
        [("signature", signature.canonical()), ("backend", backend),
         ("template", str(_core.BINDING_TEMPLATE_VERSION))]
    )
    return f"kreg_{digest[:16]}"


def binding_key(signature, backend: str, env: dict[str, str]):
    kb = _core.KeyBuilder()
    kb.add("kind", "binding").add("backend", backend).add("signature", signature.canonical())
    kb.add("template", str(_core.BINDING_TEMPLATE_VERSION))
    kb.add_file("registry/include/kreg/abi.h", str(REGISTRY_INCLUDE / "kreg" / "abi.h"))
    for name, value in env.items():
        # Host code only, so no device code; and not a kernel library.
        if name not in ("env.cuda_arch", "toolchain.kernel_lib"):
            kb.add(name, value)
    return kb.finish()
