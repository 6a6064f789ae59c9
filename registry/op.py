"""The op handle `registry.get` returns.

A handle follows its kernel: when `get` (or a watcher) loads a new build, the
same handle calls the new code on its next call, so a notebook never holds a
stale op. A failed build leaves the handle on the code it had. `snapshot()`
freezes the current version, e.g. to compare two versions side by side.

Calls follow the signature: defaults fill missing arguments, arguments after
`*` must be passed by keyword. When grad mode is on and a Tensor argument
requires grad, the call goes through autograd (autograd.py): the manifest's
`backward` op gives the gradients, and an op without one raises a clear error
when backward() reaches it.
"""
from __future__ import annotations

import re

from registry import _core
from registry.state import STATE

# Launcher tables an Op has moved away from. A compiled graph (torch.compile,
# CUDA graphs) may hold an old table's address: tables are never freed, so such
# a graph keeps running the version it was built with instead of freed memory.
# Kernel libraries are likewise never unloaded. Each table is a few bytes.
_retired_tables = STATE.retired_tables

# torch's message when a call does not fit the binding's schema. Compiled on
# the first such error, not at import (~0.4 ms on a fresh process's `get`).
_SCHEMA_MISMATCH = r"^kreg_\w+::call\(\) Expected a value of type '([^']+)' for argument '(\w+)' but instead found type '([^']+)'"


_MISSING = object()

# The named tuple of each op with several outputs, by (op, output names): one
# type per op for the process, so isinstance holds across hot reloads.
_return_types: dict = {}
_new_tuple = tuple.__new__  # fills a named tuple from the binding's tuple, no Python frame


def _return_type(name: str, signature: str):
    """A named tuple of the op's output names (torch.max's values, indices),
    or None: one output, unnamed outputs, or names a named tuple cannot take.
    Read from the canonical text ("rowmax(Tensor x) -> (Tensor values, Tensor
    indices)"): Signature.returns is registered on demand, which a cached get
    never pays for (bindings/on_demand.h)."""
    returns = signature.rpartition("->")[2].strip()
    if not returns.startswith("("):
        return None
    items = [item.split() for item in returns[1:-1].split(",")]
    if len(items) < 2 or any(len(item) != 2 for item in items):
        return None
    names = tuple(item[1] for item in items)
    key = (name, names)
    if key not in _return_types:
        import collections

        try:
            _return_types[key] = collections.namedtuple(name, names)
        except ValueError:  # a name with a leading _, or a Python keyword
            _return_types[key] = None
    return _return_types[key]


def _op_argument_error(message: str) -> Exception:
    # registry.errors is imported where an error is raised, not on import: a
    # fresh process's cached `get` never raises one and should not load it.
    from registry.errors import OpArgumentError

    return OpArgumentError(message)


def _default_value(arg):
    """A signature default (Arg.default_text, canonical) as a Python value."""
    text = arg.default_text
    if text == "None":
        return None
    if arg.type_name == "bool":
        return text == "True"
    if arg.type_name == "int":
        return int(text)
    if arg.type_name == "float":
        return float(text)
    if arg.type_name == "int[]":
        return [int(v) for v in text.strip("[]").split(",") if v.strip()]
    raise _core.UsageError(f"no default for {arg.type_text} {arg.name}")


class Op:
    __slots__ = ("kernel", "name", "signature", "backend", "key", "_fn", "_fast", "_fast_entry", "_table", "_address",
                 "_arg_names", "_removed", "_defaults", "_positional", "_fast_arity", "_tensor_index", "_spec",
                 "_backward", "_scalars", "_module_checks", "_returns")

    def __init__(self, kernel: str, name: str, signature: str, arg_names: list[str], spec=None):
        self.kernel, self.name, self.signature = kernel, name, signature
        self._arg_names = tuple(arg_names)
        self.backend = self.key = None
        self._fn = self._fast = self._fast_entry = self._table = None
        self._address = 0
        self._removed = ""  # why calling this handle is an error, once its op left the kernel
        self._backward = None
        self._module_checks = None
        self._set_spec(spec)

    def _set_spec(self, spec) -> None:
        """The manifest's op: defaults, keyword-only arguments, which are Tensors.
        Refreshed on every load, since an edited manifest may change them."""
        self._spec = spec
        self._module_checks = None  # made again on the next call of a pybind module's function
        args = list(spec.signature.args) if spec is not None else []
        self._defaults = tuple(_default_value(a) if a.has_default else _MISSING for a in args) \
            or (_MISSING,) * len(self._arg_names)
        self._positional = sum(1 for a in args if not a.keyword_only) if spec is not None else len(self._arg_names)
        # A call with exactly this many positional arguments and no keywords needs no binding step.
        self._fast_arity = len(self._arg_names) if self._positional == len(self._arg_names) else -1
        self._tensor_index = tuple(i for i, a in enumerate(args) if a.type_name == "Tensor")
        # bool, int and float arguments, checked before a call reaches the dispatcher (scalar_args.py).
        self._scalars = tuple((i, a.type_name) for i, a in enumerate(args) if a.type_name in ("bool", "int", "float"))
        self._returns = _return_type(self.name, self.signature)  # several outputs: their named tuple

    @classmethod
    def of(cls, kernel: str, spec, schema: str | None = None) -> "Op":
        """schema: the signature's canonical text, when the caller has it (a plan does)."""
        return cls(kernel, spec.name, schema or spec.signature.canonical(), [a.name for a in spec.signature.args], spec)

    def _swap(self, fn, table, backend: str, key: str, signature: str | None = None,
              arg_names: list[str] | None = None, fast=None) -> None:
        """Point the handle at new code; a changed signature comes with it.
        fast: the binding's fast entry (core/fast_entry.h), which gives a
        function bound to the table, or None."""
        if self._table is not None:
            _retired_tables.append(self._table)
        self._table = table
        self._fn, self._address = fn, (table.address if table is not None else 0)
        self._fast = fast(self._address) if fast is not None and table is not None else None
        self._fast_entry = fast if table is not None else None
        if self._fast is not None:
            _bind_is_compiling()
        self.backend, self.key = backend, key
        self._module_checks = None  # they depend on the backend
        if signature is not None:
            self.signature, self._arg_names = signature, tuple(arg_names)

    def _remove(self, reason: str) -> None:
        """The op left its kernel's manifest: this handle must not run the old
        code it still points at. Calling it raises RegistryError(reason)."""

        def removed(*args):
            raise _core.RegistryError(reason)

        self._swap(removed, None, self.backend, self.key)
        self._removed = reason

    def __call__(self, *args, **kwargs):
        # Several outputs come back as the op's named tuple (_returns), as torch.max's do;
        # torch.ops gives a plain tuple. Wrapped at each return, not in a wrapper call:
        # a single-output call pays one attribute test.
        if kwargs or len(args) != self._fast_arity:
            if self._removed:
                self._fn()  # raises: a removed op says so before any complaint about arguments
            args = self._bind_arguments(args, kwargs)
        fast = self._fast
        # Plain tensors and numbers, no grad needed: call() itself, without
        # torch.ops' boxing (core/fast_entry.h). NotImplemented: anything else,
        # which the dispatcher's op below handles. torch.compile traces that op
        # (a plain C function is opaque to it). _is_compiling is bound by the
        # _swap that set a fast entry.
        if fast is not None and not _is_compiling():
            try:  # free unless it raises (Python >= 3.11)
                result = fast(*args)
            except RuntimeError as error:
                raise self._call_error(error) from None
            if result is not NotImplemented:  # (tuple.__new__: ~0.1 us less than the named tuple's own __new__)
                return result if self._returns is None else _new_tuple(self._returns, result)
        if self._table is None:  # a hand-written pybind module's function
            checks = self._module_checks
            if checks is None and not self._removed:
                checks = self._make_module_checks()
            if checks is not None:
                checks(args)
            try:
                result = self._fn(*args)
            except TypeError as error:
                raise self._module_argument_error(error) from None
            return result if self._returns is None else self._returns(*result)
        if self._scalars:  # torch.ops takes 7 for a bool: take what torch's own functions take
            self._check_scalars(args)
        if self._tensor_index and _grad_enabled():
            for i in self._tensor_index:
                t = args[i]
                if getattr(t, "requires_grad", False):  # not a Tensor: the binding says what is wrong
                    from registry.autograd import call_with_autograd

                    result = call_with_autograd(self, args)
                    return result if self._returns is None else self._returns(*result)
        try:  # free unless it raises (Python >= 3.11)
            result = self._fn(*args, self._address)
        except RuntimeError as error:
            raise self._call_error(error) from None
        return result if self._returns is None else self._returns(*result)

    def _call_error(self, error: RuntimeError) -> Exception:
        """What a failed call raises: a RegistryError that is still the
        RuntimeError it was. The binding's checks and a launcher's refusal
        and the fake's (Meta) device check start with "<kernel>.<op>: "; anything
        else is raised as it came."""
        translated = self._argument_error(error)
        if translated is not None:
            return translated
        message = str(error)
        if message.startswith(f"{self.kernel}.{self.name}: "):
            from registry.errors import OpInputError

            return OpInputError(message)
        return error

    def _make_module_checks(self):
        """What the generated binding refuses, refused before a hand-written
        module's function runs (module_checks.py); made on the first call."""
        if self._spec is None:
            return None
        from registry.module_checks import ModuleChecks

        self._module_checks = ModuleChecks(self.kernel, self._spec, self.backend).check
        return self._module_checks

    def _module_argument_error(self, error: TypeError) -> Exception:
        """pybind11's "incompatible function arguments" from a hand-written
        binding: a function taking raw pointers (or other non-Tensor types)
        where the op passes tensors. Say what to write instead."""
        message = str(error)
        if "incompatible function arguments" not in message:
            return error
        supported = message.split("Invoked with:", 1)[0].rstrip()
        return _op_argument_error(
            f"{self.kernel}.{self.name}: the binding's function does not accept the op's arguments "
            f"({self.signature}). pybind11 says: {supported}\n"
            f"A hand-written binding's function must take torch::Tensor for each Tensor argument (and double / "
            f"int64_t / bool for the scalars) and read the data inside, e.g. x.data_ptr<float>(); it cannot take "
            f"raw pointers such as float*.")

    def _argument_error(self, error: RuntimeError):
        """torch's schema check names the generated binding (kreg_<hash>::call)
        and its extra table argument: say it in terms of this op instead."""
        found = re.search(_SCHEMA_MISMATCH, str(error))
        if found is None:
            return None

        expected, argument, got = found.groups()
        return _op_argument_error(
            f"{self.kernel}.{self.name}: argument {argument!r} must be {expected}, not {got}. "
            f"The op is {self.signature}"
        )


    def _check_scalars(self, args: tuple) -> None:
        from registry import scalar_args

        for i, type_name in self._scalars:
            if not scalar_args.accepts(type_name, args[i]):
                raise _op_argument_error(
                    f"{self.kernel}.{self.name}: argument {self._arg_names[i]!r} must be {type_name}, not "
                    f"{scalar_args.type_label(args[i])}. The op is {self.signature}")

    def _call_raw(self, args: tuple):
        return self._fn(*args, self._address)

    def _bind_arguments(self, args: tuple, kwargs: dict) -> tuple:
        if len(args) > self._positional:
            raise _op_argument_error(f"{self.signature} takes {self._positional} positional arguments, got {len(args)}"
                            + ("; pass the ones after '*' by keyword" if self._positional < len(self._arg_names) else ""))
        values = list(args) + [_MISSING] * (len(self._arg_names) - len(args))
        for name, value in kwargs.items():
            if name not in self._arg_names:
                raise _op_argument_error(f"{self.signature} has no argument {name!r}")
            index = self._arg_names.index(name)
            if index < len(args):
                raise _op_argument_error(f"{self.signature} got argument {name!r} twice")
            values[index] = value
        for i, v in enumerate(values):
            if v is _MISSING:
                values[i] = self._defaults[i]
        missing = [n for n, v in zip(self._arg_names, values) if v is _MISSING]
        if missing:
            required = sum(1 for d in self._defaults if d is _MISSING)
            raise _op_argument_error(f"{self.signature} takes {required} arguments, got {len(args) + len(kwargs)}: "
                            f"missing {', '.join(missing)}")
        return tuple(values)

    def snapshot(self) -> "Op":
        frozen = Op(self.kernel, self.name, self.signature, list(self._arg_names), self._spec)
        frozen._backward = self._backward
        frozen._swap(self._fn, self._table, self.backend, self.key, fast=self._fast_entry)
        return frozen

    def __repr__(self) -> str:
        if self._removed:
            return f"<registry op {self.signature} [removed from kernel {self.kernel}]>"
        key = self.key[:12] if self.key else "unbuilt"
        return f"<registry op {self.signature} [{self.backend}, key {key}]>"


_is_grad_enabled = None  # torch.is_grad_enabled, bound on the first call (not at import)


# torch.compiler.is_dynamo_compiling, bound when a handle first gets a fast
# entry: Dynamo reads it as True while it traces, so the traced handle takes the
# dispatcher's op. Not is_compiling(), which also asks torch.jit.is_scripting()
# (two Python calls a call, ~0.1 us) and is True in a torch.compile or export
# session outside Dynamo too, where what runs is either a real eager call (the
# fast entry gives the same result) or fake tensors and modes, which the fast
# entry hands to the dispatcher itself.
_is_compiling = None


def _bind_is_compiling() -> None:
    global _is_compiling
    if _is_compiling is None:
        import torch

        _is_compiling = torch.compiler.is_dynamo_compiling


def _grad_enabled() -> bool:
    # On every call of an op with Tensor arguments: no import statement here.
    global _is_grad_enabled
    if _is_grad_enabled is None:
        import torch

        _is_grad_enabled = torch.is_grad_enabled
    return _is_grad_enabled()


def link_backwards(ops: dict, manifest) -> None:
    """Points each op at its backward op's handle (both of one kernel)."""
    for spec in manifest.ops:
        if spec.backward and spec.name in ops:
            ops[spec.name]._backward = ops.get(spec.backward)


class OpGroup:
    """What `get` returns for a kernel with several ops: one attribute each."""

    def __init__(self, kernel: str, ops: dict[str, Op]):
        self.kernel, self.ops = kernel, ops
        for name, op in ops.items():
            setattr(self, name, op)

    def __repr__(self) -> str:
        return f"<registry kernel {self.kernel}: {', '.join(self.ops)}>"
