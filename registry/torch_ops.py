"""Making ops visible to torch.compile.

Two registrations, each done once per process (registering a namespace twice
aborts the process, which is exactly what torch's own JIT reload does):

* every generated binding `kreg_<hash>::call` gets a fake (meta) kernel, so
  torch.compile can trace through an Op handle;
* kernels with `binding = "torch-library"` are also defined as
  `torch.ops.<kernel>.<op>` with their manifest signature. The CPU and CUDA
  implementations call the kernel's Op handle, so a hot reload changes what
  runs without registering anything again, and a graph compiled before the
  reload calls the new code (old code is never unloaded, so nothing can call
  freed memory).

The generated ops are functional: the output is allocated like the first
Tensor argument, no argument is mutated, so the fake is that allocation.
"""
from __future__ import annotations

_libraries: dict[str, object] = {}   # namespace -> torch.library.Library (kept alive)
_handles: dict[tuple[str, str], dict[str, object]] = {}  # (namespace, op) -> backend -> Op
_faked: set[str] = set()


def _first_tensor(signature) -> int:
    return next(i for i, a in enumerate(signature.args) if a.type_name == "Tensor")


def register_binding_fake(namespace: str, signature) -> None:
    """A Meta kernel for kreg_<hash>::call (fake tensors fall back to it). Cheaper
    to register than torch.library.register_fake, and this runs on a fresh
    process's first `get`."""
    if namespace in _faked:
        return
    import torch

    first = _first_tensor(signature)
    library = _libraries.get(namespace)
    if library is None:
        library = _libraries[namespace] = torch.library.Library(namespace, "IMPL")
    library.impl("call", lambda *args: torch.empty_like(args[first]), "Meta")
    _faked.add(namespace)


def schema(signature) -> str:
    types = {"Tensor": "Tensor", "float": "float", "int": "int", "bool": "bool"}
    args = ", ".join(f"{types[a.type_name]} {a.name}" for a in signature.args)
    return f"{signature.name}({args}) -> Tensor"


def expose(namespace: str, op_spec, backend: str, handle) -> None:
    """Defines torch.ops.<namespace>.<op> once per process; its CPU and CUDA
    kernels call the Op handle loaded for that backend."""
    name = op_spec.signature.name
    handles = _handles.get((namespace, name))
    if handles is not None:
        handles[backend] = handle
        return
    import torch

    handles = _handles[(namespace, name)] = {backend: handle}
    library = _libraries.get(namespace)
    if library is None:
        library = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    library.define(schema(op_spec.signature))
    for key, wanted in (("CPU", "cpu"), ("CUDA", "cuda")):
        library.impl(name, _kernel(namespace, name, wanted, handles), key)
    first = _first_tensor(op_spec.signature)
    torch.library.register_fake(f"{namespace}::{name}")(lambda *args: torch.empty_like(args[first]))


def _kernel(namespace: str, name: str, backend: str, handles: dict):
    def run(*args):
        handle = handles.get(backend)
        if handle is None:
            raise RuntimeError(f"torch.ops.{namespace}.{name} has no {backend} build loaded in this process; "
                               f"call registry.get({namespace!r}, device={backend!r}) first")
        return handle(*args)

    return run
