"""The Hugging Face kernels layout on torch's stable ABI: the AOT wheel's
package (aot_wheel.py) as a kernel repository whose variants the kernels
package loads for torch 2.11 and every later torch, any Python.

    from registry.tools.hf_stable import export_hf_stable
    export_hf_stable("axpy", "hub/axpy")  # python -m registry aot axpy --hf-kernels hub/axpy --stable-abi
    kernel = kernels.get_local_kernel(Path("hub/axpy"), backend="cpu")

What is written, one folder per backend built:

    build/torch-stable-abi211-cpu-x86_64-linux/
        metadata.json       the kernels package's Metadata (id, name, version, license, backend)
        <name>/             the wheel's package, with the CPU backend only
    build/torch-stable-abi211-cu130-x86_64-linux/
        metadata.json       ... with the CUDA archs
        <name>/             the wheel's package: CUDA, and the CPU kernels (a CUDA torch
                            still calls ops on CPU tensors)

<name> is the kernel's Hub name with dashes as underscores (what kernels
imports). The libraries are the JIT's own builds; nothing is compiled here
beyond a cache miss.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from registry.errors import BuildEnvironmentError, RegistryError
from registry.tools import aot_wheel, hf_export

STABLE_ABI = tuple(int(part) for part in aot_wheel.STABLE_TARGET.split("."))


def export_hf_stable(name: str, out_dir, *, backends=None, license: str = hf_export.NO_LICENSE) -> list[Path]:
    """Writes one stable-ABI variant per backend built under `out_dir`/build/
    (a variant this registry exported before is replaced, other files and
    variants are kept); returns the variant folders."""
    from registry.resolve import find

    hub = hf_export.hub_name(find(name).name)
    module = hub.replace("-", "_")
    out = Path(out_dir).resolve()
    for backend in backends or ("cpu", "cuda"):  # before anything is built
        try:
            _replaceable(out / "build" / hf_export.variant_name(backend, stable_abi=STABLE_ABI), module)
        except BuildEnvironmentError:
            continue  # no CUDA variant with this torch: build_package says so if CUDA was asked for
    with tempfile.TemporaryDirectory(prefix=f"hf-stable-{name}-") as staging:
        root, manifest, built = aot_wheel.build_package(name, Path(staging) / module, backends=backends)
        spec = json.loads((root / aot_wheel.SPEC_FILE).read_text())
        archs = hf_export._cuda_archs(manifest)[0] if "cuda" in built else None  # as the other layout names them
        variants = []
        for backend in built:
            target = _replaceable(out / "build" / hf_export.variant_name(backend, stable_abi=STABLE_ABI), module)
            kept = [b for b in built if b == backend or (backend == "cuda" and b == "cpu")]
            _write_variant(root, spec, kept, backend, target, module, hub, manifest.name, license, archs)
            variants.append(target)
    return variants


def _replaceable(target: Path, module: str) -> Path:
    """`target` if it is free or a variant this registry exported; never another folder."""
    init = target / module / "__init__.py"
    if target.exists() and not (init.is_file() and init.read_text(errors="replace").startswith(aot_wheel.MARKER)):
        raise RegistryError(f"{target} exists and is not a variant the registry exported; move it away, "
                            f"or export into another folder")
    return target


def _write_variant(root: Path, spec: dict, kept: list[str], backend: str, target: Path, module: str, hub: str,
                   kernel: str, license: str, archs: list[str] | None) -> None:
    """The package with the `kept` backends' files only, and its metadata.json,
    written beside `target`, then put in its place."""
    staging = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    package = staging / module
    dropped = {f for b, files in spec["backends"].items() if b not in kept for f in (files["library"], files["binding"])}
    shutil.copytree(root, package, ignore=lambda folder, names: [
        n for n in names if n in dropped or (backend == "cpu" and n in ("_device", "_device_module.py"))])
    (package / aot_wheel.SPEC_FILE).write_text(
        json.dumps({**spec, "backends": {b: spec["backends"][b] for b in kept}}, indent=1) + "\n")
    info = {"type": backend}
    if backend == "cuda":
        info["archs"] = archs
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file()):
        digest.update(path.relative_to(staging).as_posix().encode() + b"\0" + path.read_bytes())
    # The id names the module in sys.modules: unique per content and backend, as the Hub's builds do.
    metadata = {"id": f"_{kernel}_stable_{backend}_{digest.hexdigest()[:10]}", "name": hub, "version": 1,
                "license": license, "backend": info, "python-depends": [], "kernel-depends": []}
    (staging / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(target)
