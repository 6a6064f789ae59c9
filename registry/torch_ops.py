"""Making ops visible to torch.compile.

Two registrations, each done once per process (registering a namespace twice
aborts the process, which is exactly what torch's own JIT reload does):

* every generated binding `kreg_<hash>::call` gets a fake (meta) kernel, so
  torch.compile can trace through an Op handle. load.py registers it
  with the binding (a fresh process's first `get` does not import this
  module); the fake itself is made here, on its first call (fake_of_table);
* kernels with `binding = "torch-library"` are also defined as
  `torch.ops.<kernel>.<op>` with their manifest signature (its canonical
  text: defaults, keyword-only arguments and Tensor(a!) included). The CPU and
  CUDA implementations call the kernel's Op handle, so a hot reload changes
  what runs without registering anything again, and a graph compiled before
  the reload calls the new code (old code is never unloaded, so nothing can
  call freed memory). An op with a backward gets it through
  torch.library.register_autograd.

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
    library.define(handle.signature)  # the canonical text (Signature.canonical), derived once per Op
    for key, wanted in (("CPU", "cpu"), ("CUDA", "cuda")):
        library.impl(name, _kernel(namespace, name, wanted, handles), key)
    torch.library.register_fake(f"{namespace}::{name}")(fake_for(op_spec, label=f"{handle.kernel}.{name}"))


def _kernel(namespace: str, name: str, backend: str, handles: dict):
    def run(*args, **kwargs):
        handle = handles.get(backend)
        if handle is None:
            from registry.errors import OpCallError

            raise OpCallError(f"torch.ops.{namespace}.{name} has no {backend} build loaded in this process; "
                               f"call registry.get({namespace!r}, device={backend!r}) first")
        # The dispatcher may leave defaulted arguments out or pass keyword-only ones by name.
        return handle._call_raw(handle._bind_arguments(args, kwargs))

    return run
