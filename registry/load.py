"""Loading what a plan found or built, and swapping it into the op handles.

dlopen the kernel library (RTLD_LOCAL, never unloaded), register each op's
namespace once per process (with its Meta kernel, for torch.compile), fill the launcher
tables with the symbols the plan named, swap them into the Op handles (the
same objects: a notebook's old handle runs the new code). Everything loaded is
kept by the process state (state.py).

One shared binding serves every op signature (core/codegen.h); the kernel
library is compiled per kernel version and holds each op's entry. An op's
namespace is registered at run time (kreg_define) on its first get; its call
takes the address of a launcher table holding the op's signature and the
launcher addresses found in the kernel library (core/launcher_table.h defines
and fills it). Swapping a table is how a new kernel version goes live
without touching the binding.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

from registry import _core
from registry.op import Op, link_backwards
from registry.state import STATE


def open_library(path: str) -> ctypes.CDLL:
    # RTLD_LOCAL: two versions of one kernel export the same launcher names.
    return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)


def build_table(library: ctypes.CDLL, op_spec, kernel: str, symbols: list[tuple[str, str]]):
    """The launcher table (_core.LauncherTable; .address is what the binding
    takes) of `op_spec`, its launchers looked up in `library`. symbols:
    (dtype, launcher symbol) per listed dtype, as a plan names them (core/plan.h).
    Raises naming every missing launcher and what to define."""
    return _core.launcher_table(library._handle, kernel, op_spec, symbols)


def load(manifest, plan, artifacts: dict, previous, expose: bool = True) -> dict[str, Op]:
    """Exactly the manifest's ops (expose: torch.ops.<namespace>.<op> for a
    torch-library binding; not for a config registry.tune tries). A handle the notebook holds for an op that
    is still defined runs the new code; one whose op left the manifest (or was
    renamed) is removed, so calling it says so instead of running old code."""
    import torch

    backend = plan.backend
    lib = artifacts["lib"]
    before = previous.ops if previous else {}
    schemas = plan.schemas
    ops = {}
    if manifest.binding == "pybind":
        module = STATE.modules.get(lib.entry.key) or (lib.built.loaded if lib.built else _import_module(lib))
        functions = module_ops(module, manifest)
        STATE.modules[lib.entry.key] = module
        for spec in manifest.ops:
            op = before.get(spec.name) or Op.of(manifest.name, spec, schemas[spec.name])
            op._swap(functions[spec.name], None, backend, lib.entry.key, *_signature_of(spec, schemas))
            op._set_spec(spec)
            ops[spec.name] = op
        _remove_dropped(manifest, before, ops)
        return ops

    # A fresh build is opened here too, from its published place (builder.failure.check_launchers_at).
    handle = STATE.libraries.get(lib.entry.key) or open_library(lib.path)
    STATE.libraries[lib.entry.key] = handle
    # Bound where a GPU is visible. A build for a GPU elsewhere (`python -m
    # registry build` with TORCH_CUDA_ARCH_LIST on a machine without one) has
    # no context to load the cubin into; nothing can call a CUDA op there.
    device = artifacts.get("device")  # the cubin, for device code with its own compiler
    if device is not None:
        from registry import environment, knobs
        from registry.device import driver_module

        if environment.cuda_available(knobs.cache_dir()):
            driver_module.bind(handle, device.key, device.path)
    namespaces, launchers = plan.namespaces, plan.launchers
    if expose and manifest.binding == "torch-library":
        from registry import torch_ops

        torch_ops.check_names_free(manifest)  # before anything of the kernel is registered
    binding = _shared_binding(plan.binding_module, artifacts)
    for spec in manifest.ops:
        namespace = namespaces[spec.name]
        if namespace not in STATE.namespaces:
            binding.define(namespace, plan.binding_schemas[spec.name])
            STATE.namespaces[namespace] = binding.path
            STATE.fast_entries[namespace] = binding.fast_entry
        fn = getattr(torch.ops, namespace).call.default
        table = build_table(handle, spec, manifest.name, launchers[spec.name])
        _register_meta(namespace, spec, table, schemas[spec.name], f"{manifest.name}.{spec.name}")
        op = before.get(spec.name) or Op.of(manifest.name, spec, schemas[spec.name])
        op._swap(fn, table, backend, lib.entry.key, *_signature_of(spec, schemas),
                 fast=STATE.fast_entries[namespace])
        op._set_spec(spec)
        ops[spec.name] = op
        if expose and manifest.binding == "torch-library":
            from registry import torch_ops

            torch_ops.expose(manifest.namespace, spec, backend, op, manifest.name)
    link_backwards(ops, manifest)
    _remove_dropped(manifest, before, ops)
    return ops


def binding_config() -> tuple:
    """What the shared binding's kreg_init is handed of Python
    (core/fast_entry.cc says what each is for). An AOT wheel's runtime, which
    cannot import the registry, writes the same tuple
    (tools/aot_wheel_runtime.py; a test keeps the two alike)."""
    import torch

    return (torch.Tensor, getattr(torch.Tensor, "__dlpack_c_exchange_api__", None),
            torch._C._get_deterministic_algorithms, torch._C._get_deterministic_fill_uninitialized_memory,
            torch._C._is_torch_function_mode_enabled, torch._C._len_torch_dispatch_stack,
            torch._C._increment_version, torch._C._autograd._profiler_enabled)


class SharedBinding:
    """The loaded shared binding (core/codegen.h): define(namespace, schema)
    registers an op's namespace::call with its one boxed kernel; fast_entry(table
    address) gives the handle's fast Python function for that table, or None
    (core/fast_entry.h). Built on torch's stable ABI, it is handed what it
    needs of Python once (kreg_init): torch keeps those where no stable shim
    reaches."""

    def __init__(self, path: str):
        import torch  # noqa: F401  its libraries first: the binding links against them

        self.path = path
        library = ctypes.PyDLL(path, mode=ctypes.RTLD_LOCAL)
        self._define = library.kreg_define
        self._define.restype, self._define.argtypes = ctypes.c_char_p, [ctypes.c_char_p, ctypes.c_char_p]
        init = library.kreg_init
        init.restype, init.argtypes = ctypes.c_int, [ctypes.py_object]
        init(binding_config())
        self.fast_entry = library.kreg_fast_entry
        self.fast_entry.restype, self.fast_entry.argtypes = ctypes.py_object, [ctypes.c_int64]
        self._library = library  # never unloaded: registered ops point into it

    def define(self, namespace: str, schema: str) -> None:
        error = self._define(namespace.encode(), schema.encode())
        if error is not None:
            from registry.errors import OpCallError

            raise OpCallError(f"torch refused to register {namespace}::{schema}: {error.decode(errors='replace')}. "
                              f"Check the op's signature in kernel.toml")


def _shared_binding(module: str, artifacts: dict) -> SharedBinding:
    """This process's shared binding for the plan's backend and environment,
    loaded on the first get that needs it (a fresh build too: from its published place)."""
    binding = STATE.bindings.get(module)
    if binding is None:
        import torch  # noqa: F401  its libraries first: the binding links against them

        path = artifacts["binding"].path
        try:
            binding = SharedBinding(path)
        except OSError as error:
            raise binding_load_error(error, path) from None
        STATE.bindings[module] = binding
        STATE.namespaces[module] = binding.path
    return binding


class BindingNeedsNewerRuntime(OSError):
    """The cached shared binding needs a newer C or C++ runtime than this
    process has. Its key leaves out the host compiler (core/build_keys.cc), so
    one built on a teammate's or another machine with a newer g++ can land
    here: resolve removes the entry and builds the binding here instead."""

    def __init__(self, path: str, missing: str):
        super().__init__(f"the shared binding {path} was built on a machine with a newer C/C++ runtime: it needs "
                         f"{missing}, which this process's libraries lack")
        self.path, self.missing = path, missing


def binding_load_error(error: OSError, path: str) -> OSError:
    """What a shared binding that does not load raises: BindingNeedsNewerRuntime
    for a missing symbol version, else the loader's own error."""
    text = str(error)
    if "version `GLIBC" not in text:
        return error
    return BindingNeedsNewerRuntime(path, text[text.index("version `") + len("version `"):].split("'", 1)[0])


def _register_meta(namespace: str, spec, table, schema: str, label: str) -> None:
    """A Meta kernel for kreg_<hash>::call: fake tensors (torch.compile) fall
    back to it. One binding serves every op with its signature, so the kernel
    picks the op's fake by the launcher table the call carries; the fake is
    made on its first call (torch_ops.fake_of_table). Cheaper to register than
    torch.library.register_fake, and this runs on a fresh process's first `get`."""
    STATE.fakes_by_table[table.address] = (spec, schema, label)
    if namespace in STATE.faked_namespaces:
        return
    import torch

    library = STATE.torch_libraries.get(namespace)
    if library is None:
        library = STATE.torch_libraries[namespace] = torch.library.Library(namespace, "IMPL")
    library.impl("call", _meta_kernel, "Meta")
    STATE.faked_namespaces.add(namespace)


def _meta_kernel(*args):
    from registry import torch_ops

    return torch_ops.fake_of_table(args[-1])(*args[:-1])


def module_ops(module, manifest, where: str | None = None) -> dict:
    """The function of each manifest op in a hand-written binding's module
    (`m.def("<op>", ...)`); check_module_ops raises when one is missing.
    `where` names the module; the binding source by default."""
    source = where or (manifest.binding_source or "the binding source")
    check_module_ops(manifest, module_functions(module), f"the module built from {source}")
    return {spec.name: getattr(module, spec.name) for spec in manifest.ops}


def _signature_of(spec, schemas) -> tuple[str, list[str]]:
    return schemas[spec.name], [a.name for a in spec.signature.args]


def _remove_dropped(manifest, before: dict[str, Op], ops: dict[str, Op]) -> None:
    for name, op in before.items():
        if name not in ops:
            op._remove(
                f"op {name!r} is no longer part of kernel {manifest.name!r}: {manifest.file} does not define it "
                f"any more. The kernel's ops are now {', '.join(ops)}; use registry.get({manifest.name!r}) for them."
            )


def module_functions(module) -> list[str]:
    """The public functions a hand-written pybind module defines (its m.def names)."""
    return sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))


def check_module_ops(manifest, defined, module_label: str) -> None:
    """Every op of a `binding = "pybind"` manifest is a function of its module.
    defined: the names the module defines (module_functions of the loaded
    module, or the m.def names of its source where it is not built, as `aot`
    has it); the one check of a module's ops. Raises BindingModuleError naming the first missing op, what the
    module does define, and what to do."""
    defined = sorted(defined)
    missing = [op.name for op in manifest.ops if op.name not in defined]
    if not missing:
        return
    from registry.errors import BindingModuleError

    raise BindingModuleError(
        f"kernel {manifest.name!r}: op {missing[0]!r} is in {manifest.file}, but {module_label} does not define it"
        + (f" (nor {', '.join(repr(m) for m in missing[1:])})" if len(missing) > 1 else "")
        + f"; it defines {', '.join(defined) if defined else 'no function'}. Add m.def(\"{missing[0]}\", ...) to "
        f"its PYBIND11_MODULE, or remove the op from kernel.toml")


def _import_module(artifact):
    import importlib.util

    name = Path(artifact.path).name.split(".")[0]
    spec = importlib.util.spec_from_file_location(name, artifact.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
