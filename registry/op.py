"""The op handle `registry.get` returns.

A handle follows its kernel: when `get` (or a watcher) loads a new build, the
same handle calls the new code on its next call, so a notebook never holds a
stale op. A failed build leaves the handle on the code it had. `snapshot()`
freezes the current version, e.g. to compare two versions side by side.
"""
from __future__ import annotations

import ctypes
import re

# Launcher tables an Op has moved away from. A compiled graph (torch.compile,
# CUDA graphs) may hold an old table's address: tables are never freed, so such
# a graph keeps running the version it was built with instead of freed memory.
# Kernel libraries are likewise never unloaded. Each table is a few bytes.
_retired_tables: list = []

# torch's message when a call does not fit the binding's schema.
_SCHEMA_MISMATCH = re.compile(
    r"^kreg_\w+::call\(\) Expected a value of type '([^']+)' for argument '(\w+)' but instead found type '([^']+)'")


class Op:
    __slots__ = ("kernel", "name", "signature", "backend", "key", "_fn", "_table", "_address", "_arg_names",
                 "_removed")

    def __init__(self, kernel: str, name: str, signature: str, arg_names: list[str]):
        self.kernel, self.name, self.signature = kernel, name, signature
        self._arg_names = tuple(arg_names)
        self.backend = self.key = None
        self._fn = self._table = None
        self._address = 0
        self._removed = ""  # why calling this handle is an error, once its op left the kernel

    def _swap(self, fn, table, backend: str, key: str, signature: str | None = None,
              arg_names: list[str] | None = None) -> None:
        """Point the handle at new code; a changed signature comes with it."""
        if self._table is not None:
            _retired_tables.append(self._table)
        self._table = table
        self._fn, self._address = fn, (ctypes.addressof(table) if table is not None else 0)
        self.backend, self.key = backend, key
        if signature is not None:
            self.signature, self._arg_names = signature, tuple(arg_names)

    def _remove(self, reason: str) -> None:
        """The op left its kernel's manifest: this handle must not run the old
        code it still points at. Calling it raises RegistryError(reason)."""
        from registry.errors import RegistryError

        def removed(*args):
            raise RegistryError(reason)

        self._swap(removed, None, self.backend, self.key)
        self._removed = reason

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = self._bind_keywords(args, kwargs)
        if len(args) != len(self._arg_names):
            if self._removed:
                self._fn()  # raises: a removed op says so before any complaint about arguments
            raise TypeError(f"{self.signature} takes {len(self._arg_names)} arguments, got {len(args)}")
        if self._table is None:  # a hand-written pybind module's function
            return self._fn(*args)
        try:  # free unless it raises (Python >= 3.11)
            return self._fn(*args, self._address)
        except RuntimeError as error:
            translated = self._argument_error(error)
            if translated is None:
                raise
            raise translated from None

    def _argument_error(self, error: RuntimeError):
        """torch's schema check names the generated binding (kreg_<hash>::call)
        and its extra table argument: say it in terms of this op instead."""
        found = _SCHEMA_MISMATCH.search(str(error))
        if found is None:
            return None
        from registry.errors import OpArgumentError

        expected, argument, got = found.groups()
        return OpArgumentError(
            f"{self.kernel}.{self.name}: argument {argument!r} must be {expected}, not {got}. "
            f"The op is {self.signature}"
        )

    def _bind_keywords(self, args: tuple, kwargs: dict) -> tuple:
        if self._removed:
            self._fn()  # raises, as in __call__
        values = list(args) + [None] * (len(self._arg_names) - len(args))
        for name, value in kwargs.items():
            if name not in self._arg_names:
                raise TypeError(f"{self.signature} has no argument {name!r}")
            index = self._arg_names.index(name)
            if index < len(args):
                raise TypeError(f"{self.signature} got argument {name!r} twice")
            values[index] = value
        missing = [n for n, v in zip(self._arg_names, values) if v is None]
        if missing:
            raise TypeError(f"{self.signature} is missing {', '.join(missing)}")
        return tuple(values)

    def snapshot(self) -> "Op":
        frozen = Op(self.kernel, self.name, self.signature, list(self._arg_names))
        frozen._swap(self._fn, self._table, self.backend, self.key)
        return frozen

    def __repr__(self) -> str:
        if self._removed:
            return f"<registry op {self.signature} [removed from kernel {self.kernel}]>"
        key = self.key[:12] if self.key else "unbuilt"
        return f"<registry op {self.signature} [{self.backend}, key {key}]>"


class OpGroup:
    """What `get` returns for a kernel with several ops: one attribute each."""

    def __init__(self, kernel: str, ops: dict[str, Op]):
        self.kernel, self.ops = kernel, ops
        for name, op in ops.items():
            setattr(self, name, op)

    def __repr__(self) -> str:
        return f"<registry kernel {self.kernel}: {', '.join(self.ops)}>"
