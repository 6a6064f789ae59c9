"""An AOT wheel: a kernel as one prebuilt package for every torch from the
stable target (2.11) on and every CPython from 3.10 on, for one platform and
CUDA major. Nothing is compiled where it is installed.

    from registry.tools.aot_wheel import export_wheel
    export_wheel("axpy", "dist")          # python -m registry aot axpy --wheel dist
    # anywhere with torch >= 2.11:
    #   python -m pip install dist/axpy_ops-1.0.0-cp310-abi3-linux_x86_64.whl
    import axpy_ops
    axpy_ops.axpy(x, y, 1.5)              # or torch.ops.axpy.axpy(x, y, 1.5)

Where aot.py's package is built by setuptools against the torch it will run
with (ATen units), the wheel carries what the JIT itself loads, per backend:
the shared binding (torch's stable ABI and Python's limited API, so no
version of either is in it), the kernel library (torch-free), each op's
launcher table as an image (core/launcher_table_image.h), and with device
code in a cubin, one cubin per architecture of TORCH_CUDA_ARCH_LIST (else the
visible GPU's). They are the JIT's own builds (`registry.get`), so a wheel
holds exactly what the registry tested here.

What is written in the wheel:

    <name>_ops/__init__.py      loads each backend, defines torch.ops.<namespace>.<op>,
                                its kernels, fake kernels and backwards
    <name>_ops/_runtime.py      aot_wheel_runtime.py, copied: loading and table images
    <name>_ops/_spec.json       per backend: the files, each op's call schema and table image
    <name>_ops/_kernel_<backend>.so, _binding_<backend>.so
    <name>_ops/_device/sm_XY.cubin, _device_module.py   device code in a cubin
    <name>_ops/_autograd.py     with a manifest backward (dispatch_autograd.py)
    <name>_ops-1.0.0.dist-info/ METADATA, WHEEL, RECORD

_spec.json's format is SPEC_FORMAT (below); the package reads only its own.
The tag is cp310-abi3-linux_<machine>: the binding uses Python's limited
API of 3.10. A CUDA backend needs a torch built for the CUDA major the
binding was (the wheel's METADATA says which).
"""
from __future__ import annotations

import base64
import hashlib
import json
import platform
import shutil
import tempfile
import zipfile
from pathlib import Path

from registry import _core, dispatch_autograd
from registry.errors import BuildEnvironmentError, RegistryError
from registry.tools import aot

SPEC_FORMAT = 1
VERSION = "1.0.0"
PYTHON_TAG = "cp310-abi3"
STABLE_TARGET = "2.11"  # TORCH_TARGET_VERSION of the binding (core/stable_binding_text.h)


def wheel_tag() -> str:
    return f"{PYTHON_TAG}-linux_{platform.machine()}"


def export_wheel(name: str, out_dir, *, backends=None) -> Path:
    """Builds (or finds in the cache) kernel `name` for each backend and
    writes its wheel into `out_dir`; returns the wheel's path. backends: a
    subset of ("cpu", "cuda"); default: every backend the manifest has (CUDA
    left out with a warning where it cannot be built)."""
    import registry
    from registry.resolve import find

    manifest = find(name)
    if manifest.binding == "pybind":
        raise RegistryError(f"kernel {name!r} is a hand-written pybind module (binding = \"pybind\"): it is built "
                            f"against one torch and Python, so it has no wheel for every torch; use "
                            f"`python -m registry aot {name} --out DIR`")
    aot._check_python_names(manifest)
    asked = backends
    backends = aot._choose_backends(manifest, backends)
    package = aot.package_name(name)
    staging = Path(tempfile.mkdtemp(prefix="kreg-wheel-"))
    try:
        root = staging / package
        root.mkdir()
        spec = {"format": SPEC_FORMAT, "kernel": name, "namespace": manifest.namespace, "backends": {}}
        cubins = {}
        for backend in list(backends):
            if backend == "cuda" and aot.keys.uses_device_module(manifest, "cuda"):
                cubins, problem = aot._device_cubins(manifest)
                backends = aot.without_cuda_if(problem, manifest, backends, asked, "CUDA kernels")
                if backend not in backends:
                    continue
            try:
                got = registry.get(name, device=backend, isolate=False)
            except BuildEnvironmentError as error:
                backends = aot.without_cuda_if(str(error), manifest, backends, asked, "CUDA kernels")
                continue
            spec["backends"][backend] = _backend_files(name, backend, got, root, package)
        if not spec["backends"]:
            raise BuildEnvironmentError(f"kernel {name!r}: no backend could be built for its wheel")
        if "cuda" in spec["backends"] and cubins:
            (root / "_device").mkdir()
            for arch, path in cubins.items():
                shutil.copy2(path, root / "_device" / f"{arch}.cubin")
            shutil.copy2(Path(aot.__file__).with_name("aot_device_module.py"), root / "_device_module.py")
            spec["backends"]["cuda"]["device"] = True
        (root / "_spec.json").write_text(json.dumps(spec, indent=1) + "\n")
        shutil.copy2(Path(__file__).with_name("aot_wheel_runtime.py"), root / "_runtime.py")
        if aot._with_backward(manifest):
            shutil.copy2(Path(dispatch_autograd.__file__), root / "_autograd.py")
        (root / "__init__.py").write_text(_init_py(manifest, spec))
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        return _write_wheel(root, package, manifest, sorted(spec["backends"]), out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _backend_files(name: str, backend: str, got, root: Path, package: str) -> dict:
    """Copies the backend's binding and kernel library into the package; each
    op's call schema and table image, as the package's _spec.json holds them."""
    import registry

    ops = got.ops if isinstance(got, registry.OpGroup) else {got.name: got}
    artifacts = registry.status(name, device=backend).artifacts
    library, binding = f"_kernel_{backend}.so", f"_binding_{backend}.so"
    shutil.copy2(artifacts["kernel library"], root / library)
    shutil.copy2(artifacts[f"binding {next(iter(ops))}"], root / binding)
    described = {}
    for op_name, op in ops.items():
        image, relocations = _core.launcher_table_image(op._table)
        schema = str(op._fn._schema).split("::", 1)[1]  # "call(Tensor x, ..., int kreg_table) -> ..."
        described[op_name] = {"namespace": f"{package}_{backend}_{op_name}", "schema": schema,
                              "image": image.hex(), "relocations": [list(r) for r in relocations]}
    return {"library": library, "binding": binding, "ops": described}


def _init_py(manifest, spec: dict) -> str:
    ns, package = manifest.namespace, aot.package_name(manifest.name)
    backends = sorted(spec["backends"])
    lines = [
        f'"""torch.ops.{ns}, a prebuilt wheel from the kernel registry\'s {manifest.name}',
        f"({manifest.description or 'no description'}), for every torch from {STABLE_TARGET} on.",
        "",
        f"    import {package}",
        f"    {package}.{manifest.ops[0].name}(...)        # or torch.ops.{ns}.{manifest.ops[0].name}(...)",
        "",
        "Importing loads each backend's binding and kernel library (_runtime.py) and",
        "defines the ops with a fake kernel each, so torch.compile traces them without",
        "a graph break. Nothing here needs (or imports) the JIT registry.",
        '"""',
        "import json as _json",
        "import warnings as _warnings",
        "",
        "import torch",
        "",
        "from . import _runtime",
        "",
        "_spec = _json.loads(open(_runtime.here(\"_spec.json\")).read())",
        "_calls = {}  # (op, backend) -> (the binding's call op, the table's address)",
        "",
        "",
        "def _load(backend, files):",
        "    library = _runtime.open_library(_runtime.here(files[\"library\"]))",
        "    if files.get(\"device\"):  # its launchers launch from the cubin carried in _device/",
        "        from ._device_module import bind",
        "",
        "        bind(_runtime.here(files[\"library\"]), _runtime.here(\"_device\"))",
        "    define = _runtime.load_binding(_runtime.here(files[\"binding\"]))",
        "    for op, described in files[\"ops\"].items():",
        "        call = _runtime.define_call(define, described[\"namespace\"], described[\"schema\"])",
        "        _calls[(op, backend)] = (call, _runtime.table(library, described[\"image\"], described[\"relocations\"]))",
        "",
        "",
        "for _backend, _files in _spec[\"backends\"].items():",
        "    try:",
        "        _load(_backend, _files)",
        "    except (OSError, ImportError) as _error:",
        "        if _backend == \"cpu\":",
        "            raise",
        "        # A torch without CUDA (or of another CUDA major) cannot load the CUDA binding:",
        "        # say so, and keep the CPU ops.",
        f"        _warnings.warn(f\"{package}: the CUDA kernels do not load ({{_error}}); only the CPU ones are \"",
        "                       \"registered\", RuntimeWarning, stacklevel=2)",
        "",
        f"_library = torch.library.Library({ns!r}, \"FRAGMENT\")",
    ]
    for op in manifest.ops:
        params = _core.fake_function(op.signature, list(op.outputs), "_params", "").splitlines()[0]
        params = params[len("def _params("):-len("):")]
        arguments = ", ".join(f"{a.name}={a.name}" if a.keyword_only else a.name for a in op.signature.args)
        lines += ["", f"_library.define({op.signature.canonical()!r})"]
        for backend in backends:
            key = {"cpu": "CPU", "cuda": "CUDA"}[backend]
            lines += [
                f"if ({op.name!r}, {backend!r}) in _calls:",
                f"    def _{op.name}_{backend}({params + ', ' if params else ''}_call=_calls[({op.name!r}, {backend!r})]):",
                f"        return _call[0]({arguments}{', ' if arguments else ''}kreg_table=_call[1])",
                "",
                f"    _library.impl({op.name!r}, _{op.name}_{backend}, {key!r})",
            ]
    return "\n".join(lines + aot.ops_lines(manifest)) + "\n"


def _write_wheel(root: Path, package: str, manifest, backends: list[str], out: Path) -> Path:
    """The wheel (a zip with a .dist-info, PEP 427) of the package folder `root`."""
    distribution = package  # "<name>_ops": already a normalized wheel name
    dist_info = f"{distribution}-{VERSION}.dist-info"
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        f"Name: {distribution.replace('_', '-')}",
        f"Version: {VERSION}",
        f"Summary: torch.ops.{manifest.namespace}: {manifest.description or 'kernel ' + manifest.name}, "
        f"prebuilt on torch's stable ABI ({', '.join(backends)})",
        f"Requires-Dist: torch>={STABLE_TARGET}",
        "Requires-Python: >=3.10",
        "",
    ])
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: kernel-registry", "Root-Is-Purelib: false",
                       f"Tag: {wheel_tag()}", ""])
    path = out / f"{distribution}-{VERSION}-{wheel_tag()}.whl"
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        def add(name: str, data: bytes) -> None:
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{name},sha256={digest},{len(data)}")

        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            add(f"{package}/{file.relative_to(root).as_posix()}", file.read_bytes())
        add(f"{dist_info}/METADATA", metadata.encode())
        add(f"{dist_info}/WHEEL", wheel.encode())
        records.append(f"{dist_info}/RECORD,,")
        archive.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return path
