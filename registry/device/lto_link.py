"""[cuda] link_sources: device sources compiled apart to LTO-IR and linked
with the rest by nvJitLink -lto, so an edit of one skips the others' front end.

Why. An edit of a CUTLASS kernel's epilogue through NVRTC and its
precompiled prelude still pays the front end of the whole unit: 9-12 s of
kernels/gemm_nvrtc's 21-30 s edit on 2 cores, and it does not shrink with
fewer kernels in the unit (bench/results/gemm_pch_units-cpu.md: one dtype's
kernel alone keeps a 2.9 GB header and a front end as long). Compiled to
LTO-IR instead, the kernels' unit is compiled once and kept; an edit of a
link source compiles that file alone (milliseconds when it is small) and
links. The link runs NVVM over the kernels again, since the epilogue is
inlined into them (as it must be: called across a relocatable boundary,
ptxas serializes wgmma and drops setmaxnreg, bench/gemm_compile_floor.py),
so what an edit saves is the front end, and what it costs is NVVM of every
kernel the link holds. kernels/gemm_nvrtc with its epilogue linked, 2 cores:
an epilogue edit 16-17 s against 27-29 s as one unit (after a restart 17 s
against 75 s); an edit of the kernels' unit 30-36 s against 27-29 s (its
front end, its LTO-IR, then the link), so a kernel links the files edited
most (bench/results/gemm_edit_loop_linked-cpu.md).

How. The driver's unit (cubin_build.device_unit) includes every device
source, the link sources last; here their lines are taken out of it. What is
left, "the main unit", is compiled by the manifest's NVRTC (through the
compile server and its precompiled header when there is a prelude) with
-dlto -rdc=true; each link source alone by NVRTC in this process, the same
options and include paths; nvJitLink links them (-lto, the unit's -arch).

A link per kernel. The first link of a main unit holds every kernel in one
module, and its cubin names them. From then on (this process, or the next
one: the names are kept with the LTO-IR) each kernel is linked alone
(-kernels-used=K), all at once on threads, and the cubins are joined into
one image of a module each (module_images.py; the launch runtime finds a
kernel in any of them): NVVM, the link's cost, then takes as long as the
slowest kernel instead of the sum. A manifest that names its kernels
([cuda] kernels_used: those its launchers launch) has them linked so from
the first link of every main unit on, an edit of the main unit included
(no link can have named the kernels of a unit compiled just now, and the
LTO-IR does not say). Exact by the list: the image holds the kernels it
names, each the new code's; one the program lacks is an error naming it; a
kernel left off is left out, and its launch says there is no such kernel.
The list is the manifest's, not learned: it is not recorded as the main
unit's kernels. Not when the program has a device global
(__device__ int n;): kernels linked apart would each have their own, and
NVVM folds one a kernel only reads to its initial value. Not either when a
link source defines a kernel or a device variable (its PTX says; what the
first link learned is the main unit's, kept while the main unit is the
same): that edit links everything together. nvJitLink's own
split (-split-compile-extended) is no substitute: it doubled the GEMM's NVVM
(bench/results/gpu-2026-12-05-linked-h100/).

Exactness. The cubin's key is the driver's (every file compiled, the link
sources among them; the recipe names them; nvJitLink's identity is a key
input). The main unit's LTO-IR is an accelerator only, kept in this process
and published in the cache (an entry of kind "ltoir", its artifact the
LTO-IR as NVRTC emits it behind a line naming the kernels, ARTIFACT_MAGIC;
verified like any entry and evicted with them), so
a new process's first edit of a link source only links. Both are reused
only for the same main unit, options, compiler identity and the bytes of
every mirrored file but the link sources (_main_key), which the main unit
must not include (the scanner checks it, both sides of every #if: a link
source included there would be defined twice). Whether a cubin holds one
module or one per kernel depends on whether the kernels were known when it
was built, not on its key's inputs; both run the same kernels.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from registry import _core
from registry.builder import elf, keys
from registry.device import module_images, nvjitlink
from registry.device.mirror import device_sources, mirrored_files
from registry.device.nvrtc_pch import cccl_options
from registry.errors import RegistryError

RECIPE = ("compiled apart with -dlto -rdc=true, linked by nvJitLink -lto -optimize-unused-variables, "
          "a module per kernel side by side once the kernels are known and share no device global:")
LTO_OPTIONS = ["-dlto", "-rdc=true"]
# -optimize-unused-variables: the device globals no kernel reads (CUTLASS's
# and libcu++'s constexpr variables, 9,466 of them in kernels/gemm_nvrtc, 1.8
# of its 1.9 MB cubin) are dropped; nothing else can reach them (the launch
# API looks up kernels only). It also makes "which globals does a kernel
# use" readable from its cubin, what splitting the link needs.
LINK_OPTIONS = ["-lto", "-optimize-unused-variables"]

# Main units' LTO-IR kept in this process, by content (_main_key), the last
# few: an edit and its revert both stay warm. kernels/gemm_nvrtc's is 22.5 MB.
KEPT_MAIN_UNITS = 4


@dataclass(frozen=True)
class MainUnit:
    ir: bytes
    # The kernels its links hold, once a link has shown them (two or more:
    # linked a module each); () when they must be linked together (the
    # program has a device global, or more kernels than an image holds);
    # None while not known.
    kernels: tuple[str, ...] | None = None


_kept: dict[str, MainUnit] = {}

# The cache entry of a main unit: its kind and artifact (entry.toml's, core/cache_store.h).
# _main_key's version: a change of what the entry holds or depends on bumps it.
ENTRY_KIND, ENTRY_ARTIFACT, MAIN_KEY_VERSION = "ltoir", "main.ltoir", "lto_link main unit 2"
# The artifact's format, version 2: this line, then "kernels" and the kernels'
# names (space-separated; none while not known) and a newline, then the
# LTO-IR as NVRTC emitted it.
ARTIFACT_MAGIC = b"kreg main unit ltoir 2\n"

# What each linked build did with the main unit ("compiled"; "kept" in this
# process; "cached", read from the cache's entry), and
# the last one's phases (LinkedDevice.phases): tests and benchmarks read them.
main_unit_events: list[str] = []
last_phases: dict[str, float] = {}
# How each link went: "one module", "a module per kernel (N)", or "one module:
# the kernels use a device global" (so they are always linked together).
link_events: list[str] = []


class LinkedDevice:
    """The manifest's NVRTC compiler (`inner`: NvrtcDevice, or NvrtcPchDevice
    with a prelude) compiling the main unit to LTO-IR, `plain` NVRTC each
    link source, nvJitLink the cubin. `link_sources`: their paths; `mirror_path`
    cubin_build's map of a project file into the staging mirror."""

    def __init__(self, inner, plain, manifest, link_sources: list[str], mirror_path):
        self.inner, self.plain, self.manifest = inner, plain, manifest
        self.link_sources, self.mirror_path = link_sources, mirror_path
        self.linker = nvjitlink.load(plain.nvrtc.library)
        self.name = f"{inner.name}, linked by nvJitLink -lto"
        # Which files are compiled apart, and which kernels the link keeps, are part of what the compiler
        # is handed.
        used = list(manifest.cuda.kernels_used)
        self.recipe = "\n".join([inner.recipe, RECIPE, *(os.path.relpath(s, manifest.dir) for s in link_sources),
                                  *(["kernels used: " + " ".join(used)] if used else [])])
        self.extra_scan_dirs, self.system_include_dir = inner.extra_scan_dirs, inner.system_include_dir
        self.phases: dict[str, float] = {}  # the last build's, as NVRTC's --time names them (cubin_build.phase_text)
        self.prelude_event = ""             # the main unit's: the prelude's event, or "kept"
        self.link_note = ""                 # how the last link went, when the kernels were linked apart

    def identity(self) -> str:
        return f"{self.inner.identity()}; {self.linker.identity()}"

    def key_inputs(self) -> list[tuple[str, str]]:
        return [*self.inner.key_inputs(), ("toolchain.nvjitlink", self.linker.identity())]

    def options(self, manifest, arch: str) -> list[str]:
        return self.inner.options(manifest, arch)

    def compile(self, unit: bytes, unit_name: str, options: list[str]) -> tuple[bytes | None, str, list[str]]:
        staging = Path(unit_name).parent.parent
        apart = {f'#include "{self.mirror_path(s, self.manifest, staging)}"' for s in self.link_sources}
        lines = unit.decode().splitlines(keepends=True)
        main = "".join(line for line in lines if line.rstrip("\n") not in apart)
        linked = [line for line in lines if line.rstrip("\n") in apart]
        lto = options + LTO_OPTIONS
        irs, logs, phases = [], [], {}
        key = _main_key(main, lto, self.inner.key_inputs(), staging, apart)
        main_unit = _kept.get(key)  # held here: a build in another thread may drop it from _kept
        source = "kept"
        if main_unit is None and (main_unit := _cached(key)) is not None:
            source = "cached"
        if main_unit is not None:
            _keep(key, main_unit)
            main_unit_events.append(source)
            self.prelude_event = "kept"
        else:
            # Checked when the main unit is compiled: a kept one was checked with the same files.
            self._check_main_includes_no_link_source()
            ir, log, deps = self.inner.compile(main.encode(), unit_name, lto, ltoir=True)
            if ir is None:
                return None, log, deps
            logs.append(log)
            main_unit_events.append("compiled")
            source = "compiled"
            self.prelude_event = getattr(self.inner, "prelude_event", "")
            phases.update(getattr(self.inner, "phases", None) or {})
            main_unit = MainUnit(ir)
        irs.append((os.path.basename(unit_name), main_unit.ir))
        started = time.perf_counter()
        cccl = cccl_options(getattr(self.inner, "cccl", None))  # libcu++ as the main unit has it (a prelude's)
        for i, line in enumerate(linked):
            name = str(Path(unit_name).with_suffix(f".link{i}.cu"))
            ir, log = self.plain.nvrtc.compile(line.encode(), name, lto + cccl, ltoir=True)
            logs.append(log)
            if ir is None:
                return None, "".join(logs), []
            irs.append((os.path.basename(name), ir))
        # [cuda] kernels_used names the kernels to link, each alone, whatever the main unit; else those a
        # first link learned. Never when the program has a device global (() once a link has seen one).
        declared = tuple(self.manifest.cuda.kernels_used) if main_unit.kernels != () else ()
        wanted = declared or main_unit.kernels
        each_alone = bool(wanted) and self._link_sources_define_nothing_shared(linked, unit_name, options + cccl)
        phases["CUDA C++ Frontend"] = phases.get("CUDA C++ Frontend", 0.0) + time.perf_counter() - started
        link_options = [_arch_option(options), *LINK_OPTIONS, *(o for o in options if o == "-lineinfo")]
        if wanted and not each_alone:  # together this time; what the first link learned still holds
            image, log, link_phases, _ = self._link(irs, link_options, ())
            kernels = main_unit.kernels
        else:
            image, log, link_phases, kernels = self._link(irs, link_options, wanted, declared=bool(declared))
            if declared and kernels == declared:  # the manifest's list, not learned: the program may define more
                kernels = main_unit.kernels
        modules = len(module_images.split(image)) if image is not None else 0
        self.link_note = f"{modules} kernels linked side by side, a module each" if modules > 1 else ""
        if main_unit.kernels is None and kernels and not declared:  # learned now, by one link of them all
            self.link_note = (f"{len(kernels)} kernels linked together (naming them in [cuda] kernels_used links "
                              "each alone, an edit of the other device sources included)")
        logs.append(log)
        # Kept and published once compiled (a failed link leaves the LTO-IR good: the link source is what
        # to fix), and again when the link learned which kernels there are.
        record = MainUnit(main_unit.ir, kernels) if image is not None else main_unit
        if source == "compiled" or record != main_unit:
            _keep(key, record)
            _publish(key, record, self.manifest.name)
        # Each phase's time, the main unit's (when compiled now: with -dlto its NVVM only emits the
        # LTO-IR) and the link's (NVVM over everything linked, then ptxas) added.
        for name, seconds in link_phases.items():
            phases[name] = phases.get(name, 0.0) + seconds
        self.phases = phases
        last_phases.clear()
        last_phases.update(self.phases)
        return image, "".join(logs), []

    def _link(self, irs, options: list[str], kernels, declared: bool = False):
        """(the image, the log, its phases, the kernels to record): a module
        per kernel side by side when `kernels` names them (`declared`: the
        manifest's kernels_used), else one link of everything, whose cubin
        says which kernels there are and whether they may be linked apart:
        not when the program has a device global. Linked alone, a kernel
        would have its own copy, and NVVM folds a global the kernel only
        reads to its initial value (what another kernel writes would never
        be seen)."""
        tried = bool(kernels) and len(kernels) <= module_images.MAX_MODULES  # more than an image holds: together
        if tried:
            each = _link_each(self.linker, irs, options, kernels, self.manifest if declared else None)
            if each is not None:
                return each
        cubin, log, phases = self.linker.link(irs, options)
        if cubin is None or kernels == ():
            link_events.append("one module")
            return cubin, log, phases, kernels
        found, variables = elf.cubin_symbols(cubin) or ([], ["?"])
        if variables:
            link_events.append("one module: the kernels use a device global")
        else:
            link_events.append("one module")
        # Linked apart, a kernel held another or a global: from now on this main unit links together.
        apart = 1 < len(found) <= module_images.MAX_MODULES and not variables and not tried
        return cubin, log, phases, tuple(found) if apart else ()

    def _link_sources_define_nothing_shared(self, linked: list[str], unit_name: str, options: list[str]) -> bool:
        """Whether the link sources define no kernel and no device variable,
        read from their PTX (one more compile each, milliseconds for a file
        without CUTLASS's headers): what the main unit's first link learned
        about the program (its kernels, no device global) then still holds.
        A link source with a __global__ or a __device__ variable (constexpr
        ones of a header included) is linked with the rest in one module."""
        # -rdc=true: every definition stays in the PTX, used in the file or not (the epilogue is not).
        virtual = [o.replace("-arch=sm_", "-arch=compute_") for o in options if o != "-dlto"]
        virtual += [] if "-rdc=true" in virtual else ["-rdc=true"]
        for i, line in enumerate(linked):
            ptx, _ = self.plain.nvrtc.compile(line.encode(), str(Path(unit_name).with_suffix(f".ptx{i}.cu")),
                                              virtual, ptx=True)
            if ptx is None or _DEFINES_SHARED.search(ptx.decode(errors="replace")):
                return False
        return True

    def _check_main_includes_no_link_source(self) -> None:
        dirs = keys.include_dirs(self.manifest) + list(self.extra_scan_dirs)
        main = [s for s in device_sources(self.manifest) if s not in self.link_sources]
        reached = {os.path.realpath(p) for p in _core.scan_include_closure(main, dirs).files}
        included = [s for s in self.link_sources if os.path.realpath(s) in reached]
        if included:
            names = ", ".join(os.path.relpath(s, self.manifest.dir) for s in included)
            raise RegistryError(
                f"{self.manifest.name}: {names} is in [cuda] link_sources, and a device source (or the prelude) "
                "includes it: it would be compiled twice and defined twice at the link. Remove the #include and "
                "declare what the file defines instead (e.g. __device__ float epilogue(float);), or move it from "
                "link_sources into device_sources")


# A kernel (.entry) or a device variable defined (.global, but not .extern) in PTX.
_DEFINES_SHARED = re.compile(r"^\s*(?:\.(?:visible|weak|common)\s+)*\.(?:entry|global)\s", re.M)


def _keep(key: str, record: MainUnit) -> None:
    """Kept in this process, the most recently used last; the oldest beyond KEPT_MAIN_UNITS dropped."""
    _kept.pop(key, None)
    _kept[key] = record
    while len(_kept) > KEPT_MAIN_UNITS:
        _kept.pop(next(iter(_kept)), None)


def _link_each(linker, irs, options: list[str], kernels: tuple[str, ...], declared_by=None):
    """A link per kernel (-kernels-used), on as many threads as cores
    (ctypes lets go of the GIL in nvJitLink), joined into one image of a
    module each (module_images.py); its phases are the slowest link's. None
    when a link holds other kernels than asked, or a device global (the
    caller links them together). `declared_by`: the manifest whose
    kernels_used these are, named when one of them is not in the program."""
    results: list = [None] * len(kernels)
    pending = list(range(len(kernels)))
    lock = threading.Lock()

    def work() -> None:  # each link holds the whole program's IR and NVVM's own: no more at once than cores
        while True:
            with lock:
                if not pending:
                    return
                i = pending.pop(0)
            try:
                results[i] = linker.link(irs, [*options, f"-kernels-used={kernels[i]}"])
            except Exception as error:  # noqa: BLE001  raised again on the caller's thread
                results[i] = error

    workers = min(len(kernels), os.cpu_count() or 1)
    threads = [threading.Thread(target=work, name=f"kreg-link-{n}") for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, Exception):
            raise result
    failed = next((r for r in results if r[0] is None), None)
    if failed is not None:  # a link error (an undefined function, say) is every link's: report one
        return None, failed[1], failed[2], kernels
    for kernel, (cubin, _, _) in zip(kernels, results):
        found, variables = elf.cubin_symbols(cubin) or ([], ["?"])
        if not found and declared_by is not None:
            raise RegistryError(
                f"{declared_by.name}: [cuda] kernels_used names {kernel}, and the device code defines no kernel of "
                f"that name: declare it extern \"C\" __global__ in a device source, or correct the list in "
                f"{declared_by.file}")
        if found != [kernel] or variables:  # known kernels have no global: only a declared list can meet one
            return None
    link_events.append(f"a module per kernel ({len(kernels)})")
    phases: dict[str, float] = {}
    for _, _, link_phases in results:
        for name, seconds in link_phases.items():
            phases[name] = max(phases.get(name, 0.0), seconds)
    log = "".join(dict.fromkeys(r[1] for r in results))  # ptxas's notes, once each
    return module_images.join([r[0] for r in results]), log, phases, kernels


def _store():
    from registry import knobs

    return _core.CacheStore(str(knobs.cache_dir()))


def _cached(key: str) -> MainUnit | None:
    """The main unit from the cache (verified by size and digest), or None."""
    store = _store()
    hit = store.lookup(key)
    if hit.entry is None or hit.entry.kind != ENTRY_KIND:
        return None
    store.touch(key)
    try:
        data = (Path(hit.entry.dir) / hit.entry.artifact).read_bytes()
    except OSError:  # evicted since the lookup
        return None
    if not data.startswith(ARTIFACT_MAGIC):
        return None
    line, _, ir = data[len(ARTIFACT_MAGIC):].partition(b"\n")
    names = tuple(line.decode().split()[1:])
    return MainUnit(ir, names if len(names) > 1 else None)


def _publish(key: str, record: MainUnit, kernel: str) -> None:
    """Best effort: a cache that cannot take it (a full disk) costs only the next process a compile."""
    store = _store()
    names = " ".join(record.kernels or ())
    try:
        staging = Path(store.make_staging_dir())
        header = ARTIFACT_MAGIC + f"kernels {names}".rstrip().encode() + b"\n"
        (staging / ENTRY_ARTIFACT).write_bytes(header + record.ir)
        entry = _core.Entry()
        entry.key, entry.kernel, entry.backend, entry.kind, entry.artifact = key, kernel, "cuda", ENTRY_KIND, ENTRY_ARTIFACT
        store.publish(str(staging), entry)
    except (OSError, RuntimeError):
        pass


def _arch_option(options: list[str]) -> str:
    arch = next((o for o in options if o.startswith("-arch=")), None)
    if arch is None:
        raise RegistryError("internal: the device options name no -arch, which the link needs")
    return arch


def _main_key(main: str, options: list[str], identity, staging: Path, apart: set[str]) -> str:
    """The main unit's content: its text, options and compiler identity
    (the staging folder, new each build, as a placeholder) and every mirrored
    file but the link sources."""
    src = str(staging / "src")
    skip = {os.path.relpath(line[len('#include "'):-1], src) for line in apart}
    digest = hashlib.sha256(f"{MAIN_KEY_VERSION}\0".encode() + main.replace(str(staging), "<staging>").encode()
                            + b"\0" + repr(identity).encode())
    for option in options:
        digest.update(option.replace(str(staging), "<staging>").encode() + b"\0")
    files = mirrored_files(src)
    for name in sorted(files):
        if name not in skip:
            digest.update(f"{name}\0{len(files[name])}\0".encode() + files[name])
    return digest.hexdigest()[:32]  # a cache key's length (core/key.h)
