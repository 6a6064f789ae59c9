"""The build recipe: what a kernel library (or pybind module) and the shared
binding are built from, as BuildPlans (step.py): sources, flags in their
order, include paths, libraries, the launcher prototypes. The flags the
registry adds are command_lines.py's (which the keys hash); the core hashes
what the plan names (core/plan.h)."""
from __future__ import annotations

from pathlib import Path

from registry import _core, command_lines, environment, knobs
from registry.builder import keys
from registry.builder.step import BuildPlan


def lib_plan(manifest, backend: str, key_hex: str, estimate_s: float | None = None, plan=None,
             previous_library: str | None = None, cuda_arch: str | None = None) -> BuildPlan:
    """The kernel library's (or pybind module's) build. plan: the _core.Plan,
    whose sources, include path, launcher prototypes (written) and launcher
    symbols it takes; asked of the core when not given (tools, tests).
    cuda_arch: the arch list of the key (env.cuda_arch)."""
    spec = keys.backend_spec(manifest, backend)
    pybind = manifest.binding == "pybind"
    includes = list(plan.include_dirs) if plan is not None else keys.include_dirs(manifest)
    # [cuda] cflags go to nvcc, except with a device cubin: then the [cuda] sources are host C++.
    host_flags = backend == "cpu" or keys.uses_device_module(manifest, backend)
    cflags = command_lines.host_cflags(list(environment.host_cxx_flags()), list(manifest.cflags),
                                       list(spec.cflags) if host_flags else [])
    # Launcher prototypes from the signatures, seen by every source (with each
    # op's entry, which the shared binding calls: core/launcher_header.h);
    # the flags around them are command_lines.py's.
    header = "" if pybind else (plan.launcher_header if plan is not None else "") or _launcher_header(manifest)
    return BuildPlan(
        kernel=manifest.name, backend=backend,
        kind="module" if pybind else "kernel-lib",
        # A module's name changes with its scanned content (Python caches
        # modules by name); a kernel library's must not (ccache, see torch_extension.py).
        module_name=f"kreg_{manifest.name}_{backend}" + (f"_{key_hex[:16]}" if pybind else _config_suffix(manifest)),
        sources=list(plan.sources) if plan is not None else keys.kernel_sources(manifest, backend),
        cflags=cflags if pybind else command_lines.kernel_lib_cflags(header, cflags),
        cuda_cflags=(keys.nvcc_flags(manifest) if pybind else
                     command_lines.kernel_lib_nvcc_flags(header, list(manifest.cflags), list(manifest.cuda.cflags))),
        ldflags=list(manifest.ldflags) if pybind else command_lines.kernel_lib_ldflags(list(manifest.ldflags)),
        include_paths=includes[1:] if pybind else includes,
        project_dirs=includes,
        estimate_s=estimate_s,
        cuda_toolkit=not keys.uses_device_module(manifest, backend),
        direct=plan.built_directly if plan is not None else keys.built_directly(manifest, backend),
        ops=[] if pybind else list(manifest.ops),
        manifest_file=manifest.file,
        launchers=[] if pybind or plan is None else [s for symbols in plan.launchers.values() for _, s in symbols],
        previous_library=previous_library,
        cuda_arch=cuda_arch if backend == "cuda" else None,
        launcher_arch=_launcher_arch(manifest, backend, cuda_arch),
    )


def _launcher_arch(manifest, backend: str, cuda_arch: str | None) -> str:
    """The arch of nvcc's device pass over launchers it compiles: the cubin's."""
    if not keys.uses_device_module(manifest, backend) or manifest.cuda.launcher_compiler != "nvcc":
        return ""
    from registry.device.cubin_build import target_arch

    return target_arch(cuda_arch if cuda_arch is not None else environment.cuda_arch_list(knobs.cache_dir()))


def _config_suffix(manifest) -> str:
    """A config registry.tune tries gets its own load() name: configs build side
    by side, and load() keeps one in-memory version per name. So does each of a
    config's one-dtype builds (core/dtype_units.h), and a checked build
    (core/derived_manifest.h)."""
    fields = []
    if manifest.tunable and manifest.config != manifest.tune.default_config():
        fields.append(("config", _core.config_label(manifest.config)))
    fields += [("dtype", d) for d in manifest.dtype_subset]
    if manifest.variant:
        fields.append(("variant", manifest.variant))
    return "_" + _core.hash_fields_hex(fields)[:12] if fields else ""


def _launcher_header(manifest) -> str:
    """The prototypes outside a plan (tools, tests): written where a plan writes them."""
    text = _core.generate_launcher_header(manifest.name, list(manifest.ops))
    digest = _core.hash_fields_hex([("launchers", text)])[:16]
    path = knobs.cache_path("generated") / f"kreg_launchers_{manifest.name}_{digest}.h"
    _write_generated(path, text)
    return str(path)


def binding_plan(manifest, backend: str, artifact) -> BuildPlan:
    """The shared binding's build (core/codegen.h). artifact: the plan's
    (_core.ArtifactPlan), which names the module and has written the source.

    Built by the registry's own compiler call (direct.py), not load(): the
    text includes only torch's stable headers and Python's limited API
    (core/stable_binding_text.h), so it needs torch's and Python's include
    folders and libtorch's stable C shims on the link line, nothing of
    libtorch_python, and no CUDA header (the stream comes through the shims):
    host C++ with or without a toolkit. Python's symbols come from the
    interpreter that loads it, as for any extension module."""
    torch_dir = _torch_dir()
    return BuildPlan(
        kernel=manifest.name, backend=backend, kind="binding", module_name=artifact.namespace,
        sources=[artifact.source], cflags=list(command_lines.BINDING_CFLAGS),
        include_paths=[str(keys.REGISTRY_INCLUDE), str(torch_dir / "include"), _python_include()], project_dirs=[],
        ldflags=command_lines.binding_ldflags(str(torch_dir / "lib"), backend == "cuda"),
        cuda_toolkit=False, direct=True,
    )


def _torch_dir() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent


def _python_include() -> str:
    import sysconfig

    return sysconfig.get_paths()["include"]


def _write_generated(path: Path, text: str) -> None:
    # Compared as bytes, never decoded: whatever the file holds (damaged, not
    # UTF-8, cut short), anything but the exact text is written again.
    try:
        if path.read_bytes() == text.encode():
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _core.write_file_atomic(str(path), text)
