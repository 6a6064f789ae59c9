"""Device code in its own cubin, through NVRTC (in-process) or `nvcc -cubin`
(nvcc_cubin.py): a content-keyed cubin whose key covers exactly the bytes the
device compiler was given. (Below, "NVRTC" stands for either; what differs is
the compiler object: its options, identity key inputs and include shims.)

Exact about headers by construction:
  1. the device sources' include closure (the C++ scanner, which counts both
     sides of every #if) plus the files the last build needed is read once
     into memory; the key hashes those bytes;
  2. the same bytes are written into a private mirror of the kernel's folders
     in the staging folder, and NVRTC gets only the mirror on its include
     path, so it cannot read a project file the key did not cover;
  3. a header it still asks for (an include spelled through a macro) fails
     with "cannot open source file"; it is resolved in the real folders, read,
     added to the snapshot and the compile is retried; the key is then taken
     over the enlarged snapshot, so the published cubin is keyed by every
     byte NVRTC saw.
Headers that resolve outside the kernel's folders and the registry's include
folder (cuda_fp16.h, ...) came with the NVRTC wheel: its identity is in the
key. NVRTC's automatic precompiled headers are never turned on. With nvcc,
the toolkit's and the system's headers come with nvcc's and its host
compiler's identities (nvcc_cubin.py).

The mirror is a new folder per build, so NVRTC's own cache (the CUDA compute
cache, which answers an identical recompile of the same source and options
in 0.07 s instead of 0.28 s on an H200) never sees the same options twice and
can never hand back a cubin of older headers: the registry's cache is what
makes going back to earlier code instant. For the same reason a precompiled
header of the CUDA headers cannot be used (NVRTC accepts a PCH only with the
command line it was made with, include paths included: warning 629). What
does shorten the compile is --split-compile (nvrtc_device.SPLIT_COMPILE_THREADS).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from registry import _core
from registry.builder import arch_check, compiler_warnings, keys
from registry.builder.diagnostics import parse_diagnostics
from registry.device.mirror import device_sources, mirror_path, mirror_roots
from registry.errors import BuildError, RegistryError

_MAX_DISCOVERY_ROUNDS = 32
_MISSING = [
    # NVRTC (and nvcc's front end): file(line): catastrophic error: cannot open source file "x.h"
    re.compile(r'^(?P<file>[^\n(]+)\((?P<line>\d+)\): catastrophic error: (?:could not|cannot) open '
               r'source file "(?P<name>[^"]+)"', re.MULTILINE),
    # nvcc preprocesses with the host compiler: file:line:col: fatal error: x.h: No such file or directory
    re.compile(r'^(?P<file>[^\n:]+):(?P<line>\d+):\d+: fatal error: (?P<name>[^\n]+?): '
               r'No such file or directory', re.MULTILINE),
]

# Every device compile this process ran, as kernel names: tests count them.
compiles_run: list[str] = []


def device_compiler(manifest):
    """The compiler the manifest names (device/compiler.py)."""
    from registry.device.compiler import device_compiler as named

    return named(manifest)


def _as_compiler(compiler):
    """A device compiler; a bare registry.device.nvrtc.Nvrtc (callers before nvcc-cubin) is wrapped."""
    from registry.device.nvrtc_device import NvrtcDevice

    return compiler if hasattr(compiler, "key_inputs") else NvrtcDevice(compiler)


class Snapshot:
    """Project files as read once: path -> bytes."""

    def __init__(self, manifest):
        self.manifest = manifest
        self.files: dict[str, bytes] = {}
        self.stamps: list = []  # taken before each read: a save in between looks changed next time

    def add(self, path: str) -> None:
        path = os.path.normpath(path)
        if path not in self.files:
            self.stamps.extend(_core.StampSet([path]).stamps)
            self.files[path] = Path(path).read_bytes()


def device_spec(manifest):
    return manifest.cuda


def scan_files(manifest, recorded: list[str], compiler) -> list[str]:
    """The device sources, their scanned include closure (with the compiler's
    extra_scan_dirs: NVRTC's <cstdint> is the registry's shim, nvcc's the
    system's) and the files the last build needed, sorted."""
    dirs = keys.include_dirs(manifest) + list(compiler.extra_scan_dirs)
    closure = _core.scan_include_closure(device_sources(manifest), dirs)
    return sorted(set(closure.files) | {p for p in recorded if Path(p).is_file()})


def target_arch(cuda_arch_list: str | None) -> str:
    """sm_XY for the device compiler: the newest entry of TORCH_CUDA_ARCH_LIST's
    form ("9.0", "8.0;9.0+PTX") or of the detected device's capability, with
    its arch-specific suffix kept ("9.0a" -> sm_90a, "10.0f" -> sm_100f):
    code built for sm_90 cannot use wgmma, and CUTLASS compiles it to a no-op."""
    entries = [e.strip().removesuffix("+PTX") for e in (cuda_arch_list or "").replace(" ", ";").split(";")]
    entries = [m for e in entries if (m := re.fullmatch(r"(\d+)\.(\d+)([af]?)", e))]
    if not entries:
        raise RegistryError(
            "no CUDA architecture to compile device code for: set TORCH_CUDA_ARCH_LIST (e.g. 9.0), "
            "or run where torch sees a GPU"
        )
    # The newest capability; of one capability the arch-specific entry ("a" before "f" before none).
    newest = max(entries, key=lambda m: (int(m.group(1)), int(m.group(2)), {"a": 2, "f": 1}.get(m.group(3), 0)))
    return f"sm_{newest.group(1)}{newest.group(2)}{newest.group(3)}"


# The staging folder's stand-in where the key hashes what a build is handed:
# each build's folder differs, the layout under it does not.
_KEYED_STAGING = Path("<staging>")


def device_unit(manifest, staging: Path, roots=None) -> str:
    """The translation unit: every device source included by its mirror path
    (one cubin, one module per kernel)."""
    roots = roots or mirror_roots(manifest)
    return "".join(f'#include "{mirror_path(s, manifest, staging, roots)}"\n' for s in device_sources(manifest))


def keyed_recipe(manifest, compiler) -> str:
    """What the compiler is handed besides its options and the files, as
    composed for a build with the staging folder as a placeholder: the unit
    (the mirror's layout) and the include paths; then the compiler's own
    recipe (what it adds inside compile(), e.g. a prelude's stop marker)."""
    includes = [f"-I{p}" for p in _include_paths(manifest, _KEYED_STAGING, compiler)]
    return "\n".join([compiler.recipe, device_unit(manifest, _KEYED_STAGING), *includes])


def device_key(manifest, snapshot: Snapshot, arch: str, compiler):
    """The cubin's base key, made by the core (core/build_keys.h says what it covers)."""
    compiler = _as_compiler(compiler)
    return _core.device_key(manifest, str(keys.REGISTRY_INCLUDE), sorted(snapshot.files.items()),
                            keyed_recipe(manifest, compiler), compiler.options(manifest, arch),
                            list(compiler.key_inputs()), keys.header_packages(manifest))


def _write_mirror(snapshot: Snapshot, staging: Path) -> None:
    roots = mirror_roots(snapshot.manifest)
    for path, data in snapshot.files.items():
        target = mirror_path(path, snapshot.manifest, staging, roots)
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)


def _resolve_missing(name: str, includer_mirror: str, manifest, staging: Path, compiler) -> str | None:
    """The real file an #include the compiler could not open refers to, searched
    like the scanner does: the including file's folder, then the include dirs
    (and the compiler's extra_scan_dirs)."""
    candidates = []
    unmirrored = _unmirror(includer_mirror, manifest, staging)
    if unmirrored != includer_mirror:
        candidates.append(Path(unmirrored).parent / name)
    candidates += [Path(d) / name for d in keys.include_dirs(manifest) + list(compiler.extra_scan_dirs)]
    for c in candidates:
        if c.is_file():
            try:
                mirror_path(str(c), manifest, staging)
            except RegistryError:
                continue
            return os.path.normpath(str(c))
    return None


def _unmirror(text: str, manifest, staging: Path) -> str:
    """Mirror paths in NVRTC's log -> the real files, so errors point at what to edit."""
    for root, name in mirror_roots(manifest):
        text = text.replace(os.path.join(staging, "src", name) + "/", root + "/")
    return text.replace(os.path.join(staging, "src") + "/", "")  # the generated unit: "<kernel>.device.cu"


def _include_paths(manifest, staging: Path, compiler) -> list[str]:
    roots = mirror_roots(manifest)
    paths = [mirror_path(d, manifest, staging, roots) for d in keys.include_dirs(manifest) + compiler.extra_scan_dirs]
    if compiler.system_include_dir:
        paths.append(compiler.system_include_dir)
    return paths


def _read_around_mirror(deps: list[str], manifest, staging: Path) -> list[str]:
    """Project files (kernel folder, registry headers) the compiler reported
    reading from their real place instead of the mirror (an absolute #include)."""
    mirror = os.path.realpath(os.path.join(staging, "src")) + "/"
    roots = mirror_roots(manifest)
    found = []
    for dep in deps:
        real = os.path.realpath(dep)
        if real.startswith(mirror) or not os.path.isfile(real):
            continue
        if any(real.startswith(root + "/") for root, _ in roots):
            found.append(os.path.normpath(dep))
    return found


class DeviceBuild:
    """A compiled cubin in a staging folder and the files the compiler read
    (its key is the driver's: the base's inputs and these files beyond them)."""

    def __init__(self, cubin_name: str, files: list[str], seconds: float, rounds: int,
                 warnings: list[str] | None = None, phases: str = ""):
        self.artifact, self.deps, self.seconds, self.rounds = cubin_name, files, seconds, rounds
        self.warnings = warnings or []  # what the device compiler warned (builder/compiler_warnings.py)
        self.phases = phases  # where the compile's time went (phase_text), when the compiler says


# NVRTC's --time phases as a kernel author reads them.
_PHASE_NAMES = {"CUDA C++ Frontend": "front end", "NVVM Optimizer": "NVVM", "PTX Translation": "ptxas"}


def phase_text(compiler) -> str:
    """Where the compiler's last compile spent its time ("front end 8.7 s,
    NVVM 12.0 s, ptxas 0.4 s; the prelude's precompiled header used"), or ""
    when it does not say (only the prelude's compile server times its phases:
    NVRTC's --time writes a file, not worth it for a 0.2 s compile)."""
    phases = getattr(compiler, "phases", None) or {}
    text = ", ".join(f"{label} {phases[name]:.1f} s" for name, label in _PHASE_NAMES.items() if name in phases)
    event = getattr(compiler, "prelude_event", "")
    if text and event in ("used", "created"):
        text += f"; the prelude's precompiled header {event}"
    elif text and event == "kept":  # lto_link.py: only the link sources compiled, then linked
        text += "; the other device sources' LTO-IR kept"
    if text and getattr(compiler, "link_note", ""):
        text += f"; {compiler.link_note}"
    return text


def compile_device(manifest, snapshot: Snapshot, arch: str, compiler, staging: Path,
                   estimate_s: float | None = None) -> DeviceBuild:
    """Compile the device sources to <staging>/<kernel>.cubin; grows the snapshot
    with headers found only by compiling (see the module comment). Shows
    progress unless the last build of this cubin (estimate_s) was quick:
    a CUTLASS kernel's edit takes 20-30 s, and the cell then says where they went."""
    from registry.builder.progress import SHOW_AFTER_S, build_progress

    compiler = _as_compiler(compiler)
    if estimate_s is not None and estimate_s < SHOW_AFTER_S:
        return _compile_device(manifest, snapshot, arch, compiler, staging)  # no progress thread to start
    with build_progress(manifest.name, "the device code (cubin)", estimate_s) as progress:
        built = _compile_device(manifest, snapshot, arch, compiler, staging)
        progress.detail = built.phases
    return built


def _compile_device(manifest, snapshot: Snapshot, arch: str, compiler, staging: Path) -> DeviceBuild:
    start = time.perf_counter()
    options = compiler.options(manifest, arch)
    unit = device_unit(manifest, staging)
    unit_name = str(staging / "src" / f"{manifest.name}.device.cu")
    for rounds in range(1, _MAX_DISCOVERY_ROUNDS + 1):
        _write_mirror(snapshot, staging)
        compiles_run.append(manifest.name)
        cubin, log, deps = compiler.compile(unit.encode(), unit_name,
                                            options + [f"-I{p}" for p in _include_paths(manifest, staging, compiler)])
        if cubin is not None:
            # Read after the compile, stamped: a save during it shows as a change next time.
            for path in _read_around_mirror(deps, manifest, staging):
                snapshot.add(path)
            arch_check.check_image(manifest.name, cubin, arch=arch, manifest_file=manifest.file,
                                   what=f"the device code ({compiler.name})")
            name = f"{manifest.name}.cubin"
            (staging / name).write_bytes(cubin)
            shutil.rmtree(staging / "src", ignore_errors=True)
            return DeviceBuild(name, sorted(snapshot.files),
                               time.perf_counter() - start, rounds,
                               compiler_warnings.warning_lines(_unmirror(log, manifest, staging)),
                               phase_text(compiler))
        missing = [(m["name"], m["file"]) for pattern in _MISSING for m in pattern.finditer(log)]
        found = [p for name, includer in missing
                 if (p := _resolve_missing(name, includer, manifest, staging, compiler)) and p not in snapshot.files]
        if not found:
            raise _build_error(manifest, _unmirror(log, manifest, staging), compiler, sorted(snapshot.files))
        for path in found:
            snapshot.add(path)
    raise RegistryError(f"{manifest.name}: device headers kept appearing after {_MAX_DISCOVERY_ROUNDS} compiles")


def _build_error(manifest, log: str, compiler=None, files: list[str] | None = None) -> BuildError:
    # NVRTC writes "file(line): error: ..." like nvcc, and "catastrophic error"
    # for a missing header: the same diagnostics as the nvcc path.
    readable = log.replace("): catastrophic error:", "): error:")
    name = compiler.name if compiler is not None else "NVRTC"
    diagnostics = parse_diagnostics(readable)
    # ptxas (or nvJitLink itself: "Undefined reference to '...'") names a mangled __device__ function, nowhere
    if "Unresolved extern function" in log or "Undefined reference to '" in log:
        from registry.builder import link_errors

        sources = device_sources(manifest)
        headers = [f for f in files or [] if f not in sources]
        diagnostics = link_errors.diagnostics(log, sources, headers, manifest.name, "[cuda]",
                                              linked=bool(manifest.cuda.link_sources)) + diagnostics
    return BuildError(manifest.name, f"the device code ({name})", diagnostics, log)


class DeviceArtifact:
    """A verified cubin in the cache (built now, or found)."""

    def __init__(self, entry, built: DeviceBuild | None, compiler, miss_reason: str = "", stamps=None,
                 source: str = "cache"):
        self.entry, self.built, self.compiler, self.miss_reason = entry, built, compiler, miss_reason
        self.source = source  # as builder/artifacts.Artifact's: "cache", "remote" or "compiled"
        self.stamps = stamps  # of the snapshot's files; None when the memo's verdict held
        self.path = str(Path(entry.dir) / entry.artifact)
        self.key = entry.key
        self.files = list(entry.deps)


def _entry_input(entry, name: str) -> str | None:
    return next((i.value for i in entry.inputs if i.name == name), None)


def label_roots(manifest) -> list[tuple[str, str]]:
    """(prefix, folder) labeling the dependency record's files: the same as
    the key's file: inputs (core/build_keys.h), so checkouts at different
    paths share records."""
    return [(prefix, os.path.realpath(folder)) for prefix, folder in keys.label_roots(manifest)]


def dep_labels(manifest):
    return _core.DepLabels(label_roots(manifest))


def previous_entry(store, memo):
    """The cache entry of this kernel's previous cubin, or None."""
    if memo is None or "device" not in memo.keys:
        return None
    return store.lookup(memo.keys["device"]).entry


def _cached(store, record: str, base, labels):
    """(entry, stamps of the record's extra files) of the cubin the cache
    holds for this content, or None: the dependency record's newest entry
    whose files match, else the base key itself (a build that needed no file
    beyond the scanned ones is published under it)."""
    found = _core.match_dep_record(record, base, labels)
    if found is not None:
        hit = store.lookup(found.key.hex)
        if hit.entry is not None:
            return hit.entry, list(found.stamps)
    hit = store.lookup(base.hex)
    return (hit.entry, []) if hit.entry is not None else None


def ensure(store, manifest, cuda_arch: str | None, memo, *, trust_memo: bool, force: bool,
           compiler=None, remote=None) -> DeviceArtifact:
    """The kernel's cubin: the memo's key when no stamp moved (trust_memo),
    else scan + snapshot + key; a miss asks the team's remote cache (remote:
    team_cache.RemoteCache or None), then compiles under the key's lock and
    stores the result there. compiler: the device compiler (default: the
    manifest's, device_compiler())."""
    from registry.builder.artifacts import Job, Target
    from registry.builder.artifacts import ensure as ensure_artifact

    nv = _as_compiler(compiler or device_compiler(manifest))
    if trust_memo and not force and memo is not None and "device" in memo.keys:
        hit = store.lookup(memo.keys["device"])
        # The same compiler too: the memo's verdict covers only the files.
        if hit.entry is not None and all(_entry_input(hit.entry, n) == v for n, v in nv.key_inputs()):
            return DeviceArtifact(hit.entry, None, nv)
    arch = target_arch(cuda_arch)
    # The key is reconstructible before compiling, as the kernel library's is
    # (core/dep_record.h): the *base key* covers the scanned files only and
    # names a dependency record in the cache, whose entries give each earlier
    # build's key from the other files it needed (macro-spelled includes,
    # headers read around the mirror) and their digests. Going back to
    # earlier content finds its cubin whatever was built in between.
    started_ns = time.time_ns()  # before any read: a file saved after it is not trusted as what was compiled
    scanned = scan_files(manifest, [], nv)
    base_snapshot = Snapshot(manifest)
    for path in scanned:
        base_snapshot.add(path)
    base = device_key(manifest, base_snapshot, arch, nv)
    record, labels = store.deps_path(base.hex), dep_labels(manifest)
    reason = ""
    if not force:
        found = _cached(store, record, base, labels)
        if found is not None:
            return DeviceArtifact(found[0], None, nv, stamps=base_snapshot.stamps + found[1])
        reason = store.lookup(base.hex).miss_reason
    # Compiled from the scanned files and those the last cubin needed (its
    # entry's deps: a macro-spelled include, which the scanner cannot see,
    # costs no extra discovery round). Not scanned again (a CUTLASS closure
    # costs 30 ms a scan): a header included since the scan is found by the
    # compile's discovery rounds.
    snapshot = base_snapshot
    previous = previous_entry(store, memo)
    for path in previous.deps if previous is not None else []:
        if Path(path).is_file():
            snapshot.add(path)
    estimate_s = previous.build_seconds if previous is not None and previous.build_seconds > 0 else None
    # Claimed, fetched from the team and published by the driver every
    # artifact goes through (builder/artifacts.py, core/build_claim.h): under
    # the base key's lock, look again (another process may have published this
    # cubin while we waited), ask the team, build in a staging folder, publish
    # the key of what was compiled (the base's inputs plus each file beyond the
    # scanned ones, as the record will reproduce it) and the record's entry.
    artifact = _core.recorded_artifact("device", "device", base, record, label_roots(manifest), scanned, force)
    target = Target(artifact)
    job = Job(manifest.name, "cuda", "device",
              lambda staging: compile_device(manifest, snapshot, arch, nv, staging, estimate_s),
              started_ns=started_ns)
    got = ensure_artifact(store, target, job, remote)
    if got.built is not None:
        # The size cap is applied after the result, with the other artifacts of
        # this get (resolve.resolve: cache_cap.collect_garbage_soon), not here in
        # the middle of the edit.
        return DeviceArtifact(got.entry, got.built, nv, reason, snapshot.stamps, got.source)
    return DeviceArtifact(got.entry, None, nv, reason or got.miss_reason, base_snapshot.stamps + target.extra_stamps,
                          got.source)
