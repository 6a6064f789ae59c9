"""Checked builds: a variant of a kernel built with sanitizer flags, keyed
apart from the normal build (its flags are part of its key), run only in a
worker (the parent never loads it: an ASan-instrumented library needs ASan's
runtime first in the process).

The variant is a generated kernel folder, <cache>/v1/checked/<name>__checked/:
a kernel.toml equal to the kernel's own plus the flags below, and a copy of
every other file of the kernel's folder (made again for each new normal
build, so it follows the user's edits); a diagnostic's path maps back to the
kernel's folder. It is planned and built as any kernel library
(core/plan.h, kernel_build.py); the binding is the normal op's (one per
signature) and so is the launcher table it copies, whose launchers the
checked library's symbols replace.

  CPU   -fsanitize=address,undefined -fno-sanitize-recover=all -g -O1
        -fno-omit-frame-pointer (the worker runs with libasan preloaded)
  CUDA  -lineinfo (the worker runs under compute-sanitizer --tool memcheck)
"""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from registry import _core, environment, knobs
from registry.state import STATE

CPU_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1", "-fno-omit-frame-pointer"]
CPU_LINK_FLAGS = ["-fsanitize=address,undefined"]
CUDA_FLAGS = ["-lineinfo"]
SUFFIX = "__checked"


def flavor_of(backend: str) -> str:
    return "asan" if backend == "cpu" else "memcheck"


class Variant:
    """The checked build of one kernel version: library path, launchers per op, folders."""

    def __init__(self, library: str, launchers: dict, folder: Path, original: Path, cubin: str):
        self.library, self.launchers, self.folder, self.original, self.cubin = library, launchers, folder, original, cubin

    def original_path(self, path: str) -> str:
        """A path the compiler recorded in the variant's folder, in the kernel's own folder."""
        for prefix in (str(self.folder), os.path.realpath(self.folder)):
            if path.startswith(prefix + os.sep):
                return str(self.original / path[len(prefix) + 1:])
        return path


_variants: dict[tuple[str, str, str], Variant] = {}  # (kernel, backend, normal build's key) -> its variant


def variant(kernel: str, backend: str, key: str) -> Variant:
    found = _variants.get((kernel, backend, key))
    if found is None:
        found = _variants[(kernel, backend, key)] = _build(kernel, backend)
    return found


def _build(kernel: str, backend: str) -> Variant:
    from registry.resolve import find, header_packages

    manifest = find(kernel)
    original = Path(manifest.dir)
    folder = knobs.cache_path("root") / "checked" / f"{kernel}{SUFFIX}"
    _mirror(original, folder, backend)
    derived = _core.parse_manifest(str(folder / "kernel.toml"))
    cache_root = knobs.cache_dir()
    store = _core.CacheStore(str(cache_root))
    env = environment.build_environment_for(derived, backend, cache_root)
    plan = _core.make_plan(derived, store, backend, env, str(knobs.REGISTRY_INCLUDE), list(STATE.namespaces), False,
                           header_packages(derived))
    planned = {a.what: a for a in plan.artifacts}
    lib = planned["lib"]
    if lib.missing:
        from registry.build.artifacts import Target
        from registry.build.misses import build_missing

        built, _ = build_missing(store, plan, derived, {"lib": Target(lib)}, None, cache_root,
                                 env.get("env.cuda_arch"))
        path, key = built["lib"].path, built["lib"].entry.key
    else:
        path, key = str(Path(lib.hit.dir) / lib.hit.artifact), lib.hit.key
    STATE.pins.hold(store, [key])
    from registry.dtypes import NAMES

    launchers = {spec.name: {NAMES.index(dtype): (path, symbol) for dtype, symbol in plan.launchers[spec.name]}
                 for spec in derived.ops}
    cubin = ""
    state = STATE.kernels.get((kernel, backend))
    if state is not None:  # device code of the normal build (a cubin is bound as is, memcheck still watches it)
        cubin = state.status.artifacts.get("device code (cubin)", "")
    return Variant(path, launchers, folder, original, cubin)


def _mirror(original: Path, folder: Path, backend: str) -> None:
    # Copies, not links: a manifest's sources must lie inside its folder. Each
    # normal build of the kernel makes the variant again (variant()), so the
    # copies follow the user's edits.
    import shutil

    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(original, folder, symlinks=False, ignore=shutil.ignore_patterns("kernel.toml", "__pycache__"))
    data = tomllib.loads((original / "kernel.toml").read_text())
    data.pop("name", None)
    section = data.setdefault(backend, {})
    if backend == "cpu":
        section["cflags"] = list(section.get("cflags", [])) + CPU_FLAGS
        data["ldflags"] = list(data.get("ldflags", [])) + CPU_LINK_FLAGS
    else:
        section["cflags"] = list(section.get("cflags", [])) + CUDA_FLAGS
    text = "# Generated by registry/isolation/checked.py from " + str(original / "kernel.toml") + "\n" + dump_toml(data)
    target = folder / "kernel.toml"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot write {value!r} as TOML")


def dump_toml(data: dict) -> str:
    """The parsed manifest as TOML: scalars, then tables, then arrays of tables."""
    lines = [f"{json.dumps(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)
             and not (isinstance(v, list) and v and all(isinstance(i, dict) for i in v))]
    for key, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{json.dumps(key)}]"] + [f"{json.dumps(k)} = {_value(v)}" for k, v in table.items()]
    for key, tables in data.items():
        if isinstance(tables, list) and tables and all(isinstance(i, dict) for i in tables):
            for table in tables:
                lines += ["", f"[[{json.dumps(key)}]]"] + [f"{json.dumps(k)} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
