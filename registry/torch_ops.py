"""Making ops visible to torch.compile.

Two registrations, each done once per process (registering a namespace twice
aborts the process, which is exactly what torch's own JIT reload does):

* every generated binding `kreg_<hash>::call` gets a fake (meta) kernel, so
  torch.compile can trace through an Op handle. load.py registers it
  with the binding (a fresh process's first `get` does not import this
  module); the fake itself is made here, on its first call (fake_of_table);
* kernels with `binding = "torch-library"` are also defined as
  `torch.ops.<namespace>.<op>` (the manifest's `namespace`, by default the
  kernel's name) with their manifest signature (its canonical
  text: defaults, keyword-only arguments and Tensor(a!) included). The CPU and
  CUDA implementations call the kernel's Op handle, so a hot reload changes
  what runs without registering anything again, and a graph compiled before
  the reload calls the new code (old code is never unloaded, so nothing can
  call freed memory). An op with a backward gets it at the dispatcher's
  Autograd key (dispatch_autograd.py), registered on the first load that
  names one; each forward reads the backward of the handle loaded then, so a
  hot reload changes the backward too (and a backward removed from the
  manifest raises when backward() reaches it, as the handle does).

Fakes allocate each output from its manifest declaration: the Python text
comes from the core (`_core.fake_function`, core/output_spec.h), the same
declaration the binding allocates from and the AOT package's fakes use. One
binding serves every op with its signature, whose declarations may differ,
so its Meta kernel picks the fake by the launcher table the call carries.

A fake kernel is registered for the Meta key, and the dispatcher prefers Meta
over CPU and CUDA: a call mixing a meta tensor with real ones lands in the
fake, not in the binding's checks. So every generated fake first checks that
all tensors share one device (all-meta inputs, and fake tensors under
torch.compile, pass) and raises naming the argument otherwise.
"""
from __future__ import annotations

from registry import _core
from registry.state import STATE

_libraries = STATE.torch_libraries   # namespace -> torch.library.Library (kept alive)
_handles = STATE.torch_handles   # (namespace, op) -> backend -> Op
_with_autograd = STATE.torch_autograd  # (namespace, op) -> "manifest" or "python": whose Autograd kernel is registered
_owners = STATE.torch_owners     # (namespace, op) -> the kernel that defined it
_fakes_by_table = STATE.fakes_by_table  # launcher table address -> fake function, or (spec, schema) until made
_compiled: dict[tuple[str, str], object] = {}  # (signature, declarations) -> fake function


def fake_for(spec, schema: str | None = None, label: str = ""):
    """The fake function of an op: fake(<signature args>) -> outputs like the real op's.
    schema: the signature's canonical text, when the caller has it (a plan does);
    label: "<kernel>.<op>", which its errors start with, as the binding's do."""
    signature = spec.signature
    cache_key = (schema or signature.canonical(), "|".join(o.text for o in spec.outputs), label)
    fn = _compiled.get(cache_key)
    if fn is None:
        import torch

        namespace = {"torch": torch}
        exec(_core.fake_function(signature, list(spec.outputs), "fake", label), namespace)  # text from core/output_spec.cc
        fn = _compiled[cache_key] = namespace["fake"]
    return fn


def fake_of_table(address: int):
    """The fake of the op whose launcher table is at `address`: the binding's
    Meta kernel (load.py) asks on each call. Made on the first: most
    processes never trace, and a fresh process's first `get` should not
    generate and compile it."""
    fake = _fakes_by_table[address]
    if isinstance(fake, tuple):
        fake = _fakes_by_table[address] = _positional(fake_for(*fake), fake[0].signature)
    return fake


def _positional(fake, signature):
    """The binding's `call` takes every argument positionally (no defaults, no
    '*'), while the fake has the op's own parameters: pass the keyword-only
    ones by name."""
    keywords = tuple(a.name for a in signature.args if a.keyword_only)
    if not keywords:
        return fake
    first = len(signature.args) - len(keywords)

    def meta(*args):
        return fake(*args[:first], **dict(zip(keywords, args[first:])))

    return meta


def check_names_free(manifest) -> None:
    """Raises TorchOpsNameError when an op of `manifest` would take a
    torch.ops name that another kernel, or other code in the process (its own
    TORCH_LIBRARY, torch.library), already holds. Called before the kernel
    registers anything, so a refused get leaves nothing behind. Sharing a
    namespace is fine: only the op's full name must be free."""
    import torch

    namespace = manifest.namespace
    for spec in manifest.ops:
        qualified = f"{namespace}::{spec.name}"
        owner = _owners.get((namespace, spec.name))
        if owner == manifest.name:
            continue  # this kernel's own, from an earlier get: a reload
        if owner is not None:
            holder = f"kernel {owner!r}"
        elif torch._C._jit_get_schemas_for_operator(qualified):
            holder = "other code in this process (a TORCH_LIBRARY or torch.library definition)"
        else:
            continue
        from registry.errors import TorchOpsNameError

        raise TorchOpsNameError(
            f"kernel {manifest.name!r}: torch.ops.{namespace}.{spec.name} is already defined by {holder}; "
            f"nothing of {manifest.name!r} was registered. Give the kernel another namespace = \"...\" in "
            f"{manifest.file}, or rename the op; ops of other names can share the namespace {namespace!r}")


def expose(namespace: str, op_spec, backend: str, handle, kernel: str) -> None:
    """Defines torch.ops.<namespace>.<op> once per process; its CPU and CUDA
    kernels call the Op handle loaded for that backend. check_names_free first."""
    name = op_spec.signature.name
    handles = _handles.get((namespace, name))
    if handles is not None:
        handles[backend] = handle
    else:
        import torch

        handles = _handles[(namespace, name)] = {backend: handle}
        _owners[(namespace, name)] = kernel
        library = _libraries.get(namespace)
        if library is None:
            library = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
        library.define(handle.signature)  # the canonical text (Signature.canonical), derived once per Op
        for key, wanted in (("CPU", "cpu"), ("CUDA", "cuda")):
            library.impl(name, _kernel(namespace, name, wanted, handles, kernel), key)
        torch.library.register_fake(f"{namespace}::{name}")(fake_for(op_spec, label=f"{handle.kernel}.{name}"))
    if op_spec.backward and (namespace, name) not in _with_autograd:  # a Python backward stays
        _register_autograd(namespace, op_spec, handles)


def takes_autograd(namespace: str, signature) -> bool:
    """Whether torch.ops.<namespace>.<op> gets an Autograd kernel for its
    manifest backward (the JIT op here, the AOT package in tools/aot.py).
    An op writing in place has no gradient (the handle refuses one). Raises
    for a keyword-only Tensor, which torch's register_autograd cannot give a
    gradient."""
    if any(a.mutated for a in signature.args):
        return False
    keyword_tensors = [a.name for a in signature.args if a.keyword_only and a.type_name == "Tensor"]
    if keyword_tensors:
        from registry.errors import ManifestError

        raise ManifestError(
            f"{namespace}.{signature.name} has a backward but takes the Tensor {keyword_tensors[0]!r} after '*': "
            f"torch.ops cannot give a keyword-only Tensor a gradient. Move it before '*' in the signature")
    return True


def _register_autograd(namespace: str, op_spec, handles: dict) -> None:
    from registry import dispatch_autograd

    signature = op_spec.signature
    if not takes_autograd(namespace, signature):
        return
    name = signature.name

    def backward_of(device: str):
        handle = handles.get(device) or next(iter(handles.values()))
        backward = handle._backward
        if backward is None:
            return None
        spec = backward._spec.signature
        return dispatch_autograd.Backward(spec.name, tuple(a.name for a in spec.args),
                                          tuple(r.name for r in spec.returns))

    def missing():
        from registry.autograd import no_backward_error

        return no_backward_error(next(iter(handles.values())))

    dispatch_autograd.register(_libraries[namespace], namespace, name, tuple(a.name for a in signature.args),
                               sum(1 for a in signature.args if not a.keyword_only),
                               tuple(r.name for r in signature.returns), backward_of, missing)
    _with_autograd[(namespace, name)] = "manifest"


def register_autograd(op, backward, *, setup_context=None) -> None:
    """A backward written in Python for a registry op, for an op whose
    manifest names none: torch.library.register_autograd's arguments, with
    two differences. The gradients reach `backward` contiguous (autograd
    hands e.g. expanded ones from .sum().backward(), which every registry op
    refuses; only those are copied), so it can call other registry ops on
    them; and the op's handle takes the same backward as torch.ops.

    op: the handle (registry.get) or torch.ops.<kernel>.<op> of a kernel with
    binding = "torch-library", loaded in this process."""
    from registry import dispatch_autograd
    from registry.errors import OpCallError

    namespace, name = _qualified(op)
    if (namespace, name) not in _handles:
        raise OpCallError(f"{namespace}.{name} is not a torch.ops op of a loaded kernel: set binding = "
                          f"\"torch-library\" in its kernel.toml and registry.get({namespace!r}) first")
    if (namespace, name) in _with_autograd:
        where = "its kernel.toml names a backward" if _with_autograd[(namespace, name)] == "manifest" \
            else "register_autograd gave it one already"
        raise OpCallError(f"torch.ops.{namespace}.{name} has a backward ({where}); torch takes one per op and "
                          f"process: restart the kernel to register another")

    def contiguous_backward(ctx, *grads):
        return backward(ctx, *dispatch_autograd.contiguous_grads(grads))

    import torch

    torch.library.register_autograd(f"{namespace}::{name}", contiguous_backward, setup_context=setup_context,
                                    lib=_libraries[namespace])
    _with_autograd[(namespace, name)] = "python"


def _qualified(op) -> tuple[str, str]:
    if isinstance(getattr(op, "kernel", None), str):  # an Op handle
        return STATE.torch_namespace(op.kernel, op.name), op.name
    schema = getattr(op, "_schema", None)  # OpOverload
    text = schema.name if schema is not None else getattr(op, "_qualified_op_name", op)  # OpOverloadPacket
    if not isinstance(text, str) or "::" not in text:
        from registry.errors import UsageError

        raise UsageError(f"register_autograd: {op!r} is not a registry op; pass its handle or torch.ops.<kernel>.<op>")
    namespace, _, name = text.partition("::")
    return namespace, name


def _kernel(namespace: str, name: str, backend: str, handles: dict, kernel: str):
    def run(*args, **kwargs):
        handle = handles.get(backend)
        if handle is None:
            from registry.errors import OpCallError

            raise OpCallError(f"torch.ops.{namespace}.{name} has no {backend} build loaded in this process; "
                               f"call registry.get({kernel!r}, device={backend!r}) first")
        # The dispatcher may leave defaulted arguments out or pass keyword-only ones by name.
        return handle._call_raw(handle._bind_arguments(args, kwargs))

    return run
