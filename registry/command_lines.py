"""The command lines the registry composes for a build, in one place: the
builders run what these functions return (builder/recipe.py for a kernel
library's flags, builder/direct.py for its own compiler calls,
builder/nvcc_launchers.py for launchers nvcc compiles, builder/launch_runtime.py
for the launch runtime's object, tools/aot.py for a
package's setup.py), and every key covers this file by its digest
(environment.py's toolchain.command_lines). So a flag changed here rebuilds
what it builds, with no recipe string to bump by hand
(tests/test_command_lines.py edits one).

What is not here is keyed where it is composed: the manifest's own flags and
include dirs (core/build_keys.h), the device compilers' options (each
compiler's options(), hashed as the device key's flags.device), the shared
binding's generated text (by digest).

Pure functions over lists of strings, importing nothing of the registry.
The builders only choose which values go in (the manifest's, the machine's);
no flag of the registry's own is written anywhere else, or the digest would
not cover it.
"""
from __future__ import annotations

# ---- a kernel library's flags (builder/recipe.py) ---------------------------

# Launchers are the library's only exports (kreg/abi.h marks them visible).
HIDDEN_CFLAGS = ["-fvisibility=hidden"]
HIDDEN_NVCC_FLAGS = ["-Xcompiler=-fvisibility=hidden"]
# -Bsymbolic: the library's own calls stay inside it (two versions of a
# kernel are loaded side by side). -z defs: a symbol no source defines fails
# the link, where it can be named with its declaration (builder/failure.py),
# not at the first dlopen.
_LIBRARY_LDFLAGS = ["-Wl,-Bsymbolic", "-Wl,-z,defs"]


def prototypes(launcher_header: str) -> list[str]:
    """The launcher prototypes (core/launcher_header.h), seen by every unit:
    a launcher that disagrees with its signature does not compile."""
    return ["-include", launcher_header]


def host_cflags(host_defaults: list[str], manifest_cflags: list[str], section_cflags: list[str]) -> list[str]:
    """The host compiler's flags from the machine and the manifest: the
    host's defaults first, so that a manifest flag (-mno-f16c, say) wins."""
    return [*host_defaults, *manifest_cflags, *section_cflags]


def kernel_lib_cflags(launcher_header: str, host_flags: list[str]) -> list[str]:
    """A kernel library's units: hidden, the launcher prototypes, host_cflags()."""
    return [*HIDDEN_CFLAGS, *prototypes(launcher_header), *host_flags]


def nvcc_flags(manifest_cflags: list[str], cuda_cflags: list[str]) -> list[str]:
    """What nvcc gets from the manifest: the top-level cflags (documented as
    applying to every unit of every backend) and then [cuda] cflags. nvcc
    passes the ones it does not know (-fno-math-errno, say) on to the host
    compiler instead of failing."""
    if not manifest_cflags:
        return list(cuda_cflags)
    return ["-forward-unknown-to-host-compiler", *manifest_cflags, *cuda_cflags]


def kernel_lib_nvcc_flags(launcher_header: str, manifest_cflags: list[str], cuda_cflags: list[str]) -> list[str]:
    return [*HIDDEN_NVCC_FLAGS, *prototypes(launcher_header), *nvcc_flags(manifest_cflags, cuda_cflags)]


def kernel_lib_ldflags(manifest_ldflags: list[str]) -> list[str]:
    return [*_LIBRARY_LDFLAGS, *manifest_ldflags]


# The shared binding (builder/recipe.py's binding_plan): host C++ on torch's stable ABI.
BINDING_CFLAGS = ["-O2"]


def binding_ldflags(torch_lib_dir: str, cuda: bool) -> list[str]:
    return [f"-L{torch_lib_dir}", "-ltorch_cpu", *(["-ltorch_cuda"] if cuda else [])]


# ---- the registry's own compiler calls (builder/direct.py) -------------------


def direct_flags(cflags: list[str], include_paths: list[str]) -> list[str]:
    # A kernel's own standard (CUTLASS launchers pin -std=c++17) replaces the
    # default: nvcc warns on every build when given two.
    own_std = any(f in ("-std", "--std") or f.startswith(("-std=", "--std=")) for f in cflags)
    return [*([] if own_std else ["-std=c++20"]), "-fPIC", *cflags, *(f"-I{p}" for p in include_paths)]


def direct_one_step(cxx: str, flags: list[str], source: str, linked: list[str], link_flags: list[str],
                    out: str) -> list[str]:
    """One source compiled and linked in one call (the fastest edit), its
    dependencies written to 0.d."""
    return [cxx, *flags, "-pipe", "-MMD", "-MF", "0.d", source, *linked, *link_flags, "-o", out]


def direct_compile(cxx: str, flags: list[str], source: str, obj: str, depfile: str) -> list[str]:
    return [cxx, *flags, "-MMD", "-MF", depfile, "-c", source, "-o", obj]


def direct_link(cxx: str, objects: list[str], linked: list[str], link_flags: list[str], runtime_libs: list[str],
                out: str) -> list[str]:
    return [cxx, *objects, *linked, *link_flags, *runtime_libs, "-o", out]


def link_flags(ldflags: list[str], libstdcxx: list[str], allow_undefined: bool = False) -> list[str]:
    """A shared library's link: everything resolved here (the shared
    binding's Python symbols excepted: they come from the interpreter that
    loads it, allow_undefined), with torch's libstdc++ by path (libstdcxx)."""
    return ["-shared", *ldflags, *([] if allow_undefined else ["-Wl,--no-undefined"]), *libstdcxx]


# What the compiler driver would link, less libstdc++ (the runtime libraries
# of C, not of C++). Explicit, for clang++ as for g++ (g++ 12 has no -nostdlib++).
LEAN_LIBS = ["-nodefaultlibs", "-lm", "-lc", "-lgcc_s", "-lgcc"]


def lean_link_flags(ldflags: list[str]) -> list[str]:
    return ["-shared", *ldflags, "-Wl,--no-undefined", *LEAN_LIBS]


# ---- launchers nvcc compiles (builder/nvcc_launchers.py) --------------------


def nvcc_launcher_compile(nvcc: str, arch: str, host_cxx: str, flags: list[str], depfile: str, source: str,
                          obj: str) -> list[str]:
    return [nvcc, "-x", "cu", "-c", f"-arch={arch}", "-ccbin", host_cxx, "-forward-unknown-to-host-compiler",
            *flags, "-MMD", "-MF", depfile, source, "-o", obj]


def nvcc_runtime_libs(library_dirs: list[str]) -> list[str]:
    """The static CUDA runtime and what it needs, from nvcc's library folders."""
    return [*(f"-L{d}" for d in library_dirs), "-lcudart_static", "-ldl", "-lpthread", "-lrt"]


# ---- the launch runtime's object (builder/launch_runtime.py) ----------------


def launch_runtime_compile(cxx: str, include_dir: str, source: str, out: str) -> list[str]:
    """Fixed flags, not the kernel's: nothing in the runtime is tuned per
    kernel. Hidden visibility as every kernel library's: the runtime exports
    only kreg_bind_device_module, which says so itself."""
    return [cxx, "-std=c++20", "-fPIC", "-O2", "-fvisibility=hidden", f"-I{include_dir}", "-c", source, "-o", out]
