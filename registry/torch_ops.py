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
Tensor argument, no argument is mutated, so the fake is that allocation,
after the one check a fake can make. A fake kernel is registered for the
Meta key, and the dispatcher prefers Meta over CPU and CUDA: a call mixing a
meta tensor with real ones lands in the fake, not in the binding's checks. So
the fake checks that all tensors share one device (all-meta inputs, and fake
tensors under torch.compile, pass) and raises naming the argument otherwise;
without it such a call returned uninitialized memory.
"""
from __future__ import annotations

_libraries: dict[str, object] = {}   # namespace -> torch.library.Library (kept alive)
_handles: dict[tuple[str, str], dict[str, object]] = {}  # (namespace, op) -> backend -> Op
_faked: set[str] = set()


def _first_tensor(signature) -> int:
    return next(i for i, a in enumerate(signature.args) if a.type_name == "Tensor")


def fake_kernel(op_name: str, signature):
    """The fake (meta) kernel of an op: empty_like(first Tensor argument),
    once every Tensor argument is on the first one's device."""
    first = _first_tensor(signature)
    first_name = signature.args[first].name
    tensors = [(i, a.name) for i, a in enumerate(signature.args) if a.type_name == "Tensor"]

    def fake(*args):
        import torch

        lead = args[first]
        for index, name in tensors:
            if args[index].device != lead.device:
                raise RuntimeError(
                    f"{op_name}: argument '{name}' is on {args[index].device} but '{first_name}' is on "
                    f"{lead.device}; put all tensors on one device (meta tensors only with meta tensors)")
        return torch.empty_like(lead)

    return fake


def register_binding_fake(namespace: str, signature) -> None:
    """A Meta kernel for kreg_<hash>::call (fake tensors fall back to it). Cheaper
    to register than torch.library.register_fake, and this runs on a fresh
    process's first `get`."""
    if namespace in _faked:
        return
    import torch

    library = _libraries.get(namespace)
    if library is None:
        library = _libraries[namespace] = torch.library.Library(namespace, "IMPL")
    # The binding serves every kernel with this signature: errors name the op.
    library.impl("call", fake_kernel(signature.name, signature), "Meta")
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
    torch.library.register_fake(f"{namespace}::{name}")(fake_kernel(f"{namespace}.{name}", op_spec.signature))


def _kernel(namespace: str, name: str, backend: str, handles: dict):
    def run(*args):
        handle = handles.get(backend)
        if handle is None:
            raise RuntimeError(f"torch.ops.{namespace}.{name} has no {backend} build loaded in this process; "
                               f"call registry.get({namespace!r}, device={backend!r}) first")
        return handle(*args)

    return run
