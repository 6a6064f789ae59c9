"""The manifest's input checks for an op whose binding is a hand-written
pybind module (`binding = "pybind"`).

The generated binding refuses a tensor on the wrong device, on another
device than the first tensor, of a dtype the op does not list (or not the
dtype the manifest fixes for it), or not contiguous, before any launcher runs
(core/binding_text.cc, check_tensors). A hand-written module's function is
the lab's code, kept as it is, and often checks less: a strided view or a
float64 tensor reaches a float32 kernel and gives wrong numbers silently. So
the handle runs the same checks, with the same messages, before it calls the
function. The shape rule (`same_shape`) is left to the module: a lab's
binding may broadcast on purpose.

Built once per op version (on its first call) as a tuple per Tensor argument,
so a call costs a few attribute reads per tensor.
"""
from __future__ import annotations

from torch import Tensor  # imported on a pybind op's first call, when torch is loaded already

# torch.dtype -> the name c10 prints (what the generated binding's messages say).
_C10_NAMES = {
    "float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double", "int8": "Char",
    "int16": "Short", "int32": "Int", "int64": "Long", "uint8": "Byte", "bool": "Bool",
    "float8_e4m3fn": "Float8_e4m3fn", "float8_e5m2": "Float8_e5m2", "complex64": "ComplexFloat",
    "complex128": "ComplexDouble", "complex32": "ComplexHalf",
}


def c10_name(dtype) -> str:
    name = str(dtype).replace("torch.", "")
    return _C10_NAMES.get(name, name)


def _shape_text(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


class ModuleChecks:
    """check(args): raises OpInputError for the first argument the manifest
    excludes; args are the call's arguments in signature order."""

    __slots__ = ("op_name", "cuda", "tensors", "allowed", "listed")

    def __init__(self, kernel: str, spec, backend: str):
        from registry import dtypes

        self.op_name = f"{kernel}.{spec.name}"
        self.cuda = backend == "cuda"
        tensors = []
        for i, arg in enumerate(spec.signature.args):
            if arg.type_name != "Tensor":
                continue
            fixed = spec.arg_dtypes[i] if i < len(spec.arg_dtypes) else -1
            tensors.append((i, arg.name, dtypes.torch_dtype(dtypes.NAMES[fixed]) if fixed >= 0 else None,
                            bool(arg.mutated)))
        self.tensors = tuple(tensors)
        self.allowed = frozenset(dtypes.torch_dtype(d) for d in spec.dtypes)
        self.listed = ", ".join(spec.dtypes)

    def check(self, args: tuple) -> None:
        # On every call: each torch attribute read costs ~0.1-0.2 us, so each is read once.
        first = dispatch = None
        for i, name, fixed, mutated in self.tensors:
            t = args[i]
            if not isinstance(t, Tensor):  # None for a Tensor?, or a wrong type pybind11 will name
                continue
            if self.cuda:
                device = t.device
                if device.type != "cuda":
                    self._refuse_device(name, device)
                if first is None:
                    first = (name, device)
                elif device != first[1]:
                    self._refuse(f"argument '{name}' is on {device} but '{first[0]}' is on {first[1]}; "
                                 f"put all tensors on one device")
            elif not t.is_cpu:
                self._refuse_device(name, t.device)
            dtype = t.dtype
            if fixed is not None:
                if dtype is not fixed:
                    self._refuse(f"argument '{name}' is {c10_name(dtype)} but the op takes {c10_name(fixed)}; "
                                 f"convert it with .to(dtype) (the op never converts implicitly)")
            elif dispatch is None:
                dispatch = (name, dtype)
            elif dtype is not dispatch[1]:
                self._refuse(f"argument '{name}' is {c10_name(dtype)} but '{dispatch[0]}' is "
                             f"{c10_name(dispatch[1])}; convert one of them with .to(dtype) "
                             f"(the op never converts implicitly)")
            if not t.is_contiguous():
                self._refuse_strided(name, t, mutated)
        if dispatch is not None and dispatch[1] not in self.allowed:
            self._refuse(f"dtype {c10_name(dispatch[1])} is not supported; the manifest lists {self.listed} "
                         f"(for '{dispatch[0]}')")

    def _refuse_device(self, name: str, device) -> None:
        where, move = ("CUDA", ".cuda()") if self.cuda else ("the CPU", ".cpu()")
        self._refuse(f"argument '{name}' is on {device} but this build of the op runs on {where}; "
                     f"move it with {move} (the op never copies implicitly)")

    def _refuse_strided(self, name: str, t, mutated: bool) -> None:
        layout = f"sizes {_shape_text(t.shape)}, strides {_shape_text(t.stride())}"
        if not mutated:
            self._refuse(f"argument '{name}' is not contiguous ({layout}); pass .contiguous() "
                         f"(the op never copies implicitly)")
        self._refuse(f"argument '{name}' is not contiguous ({layout}) and is written in place: a .contiguous() "
                     f"copy passed instead would receive the result, and '{name}' would not. Make it contiguous "
                     f"first and pass that tensor (c = {name}.contiguous(), then the op on c), then copy back "
                     f"with {name}.copy_(c), or keep using c")

    def _refuse(self, message: str):
        from registry.errors import OpInputError

        raise OpInputError(f"{self.op_name}: {message}")
