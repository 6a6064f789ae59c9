"""The content keys of one kernel: its library, and each op's binding.

The kernel-lib key covers the manifest, every source, the include closure
(scanned before the first build, plus the compiler's depfile list recorded
after it), the flags and the build environment. A binding key covers only
what the generated binding depends on: the op signature, the backend, the
template version and the environment.
"""
from __future__ import annotations

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


def kernel_files(manifest, backend: str, recorded_deps: list[str]) -> tuple[list[str], list[str]]:
    """(every file the kernel library depends on, unresolved includes)."""
    sources = kernel_sources(manifest, backend)
    headers = [str(Path(manifest.dir) / h) for h in manifest.headers]
    closure = _core.scan_include_closure(sources + headers, include_dirs(manifest))
    files = set(closure.files) | {manifest.file} | set(recorded_deps)
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
        if name not in ("env.cuda_arch",):  # host code only: the binding has no device code
            kb.add(name, value)
    return kb.finish()
