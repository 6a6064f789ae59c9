"""The registry's exceptions: each says what went wrong and what to do next.

Every error the package raises derives from RegistryError, so a tool catches
one type, and also from the builtin it stands for (ValueError, RuntimeError,
...), so code catching that keeps working. The C++ core's errors are mapped
in one place, registry/bindings/module.cc, which defines the base classes
below that both sides share:

  RegistryError    the base
  ManifestError    a kernel.toml problem (ValueError); .file and .field say where
  SignatureError   an op signature that does not parse (ValueError)
  UsageError       a function got an argument it cannot use (ValueError)
  CoreError        the core could not do what was asked, e.g. a cache file it
                   cannot read or write (RuntimeError)
"""
from __future__ import annotations

from typing import NamedTuple

from registry._core import CoreError, ManifestError, RegistryError, SignatureError, UsageError  # noqa: F401


class KernelNotFoundError(RegistryError, LookupError):
    def __init__(self, name: str, known: list[str], closest: str, roots: list[str] = (), shown: list[str] = ()):
        """shown: how the listing names each of `known` ("lab_02_axpy (folder lab-02-axpy)")."""
        self.name, self.known, self.closest, self.roots = name, known, closest, list(roots)
        hint = f" Did you mean {closest!r}?" if closest else ""
        listing = ", ".join(shown or known) if known else "none"
        searched = ", ".join(self.roots) if self.roots else "no folder"
        super().__init__(
            f"no kernel named {name!r}.{hint} Registered kernels: {listing}. "
            f"A kernel is a %%kernel cell run in this process, or a folder holding a kernel.toml under one "
            f"of the folders searched: {searched}; "
            f"get() takes the folder's name or the kernel's (the manifest's name key, else the folder's name "
            f"lowercased with other characters than [a-z0-9_] as _). "
            f"Add a folder to the search with REGISTRY_KERNELS_PATH."
        )


class KernelFolderError(KernelNotFoundError):
    """The folder asked for holds a kernel.toml but cannot be a kernel (no
    name derivable, an invalid name key, a name another folder also gives);
    says why and what to change."""

    def __init__(self, name: str, folder: str, reason: str):
        self.name, self.folder, self.reason = name, folder, reason
        self.known, self.closest, self.roots = [], "", []
        RegistryError.__init__(self, f"{folder} holds a kernel.toml but cannot be a kernel: {reason}")


class OpArgumentError(RegistryError, TypeError):
    """An op was called with an argument of the wrong type. Names the op, the
    argument and the op's signature (not the generated binding it runs)."""


class MagicUsageError(UsageError):
    """A notebook magic got arguments it cannot use; says what to write."""


class SettingError(RegistryError, ValueError):
    """A REGISTRY_* environment variable holds a value the registry cannot use;
    names the variable and the values it takes."""


class NotLoadedError(RegistryError, LookupError):
    """Asked about a kernel this process has not loaded; says to call get() first."""


class OpCallError(RegistryError, RuntimeError):
    """An op cannot run as called (no backward for a gradient, no build for that
    device in this process); says what to change."""


class OpInputError(RegistryError, RuntimeError):
    """An op's inputs fail its checks (device, contiguity, dtype, shape) or its
    launcher refused them; the message names the op and the argument."""


class BindingModuleError(RegistryError, AttributeError):
    """A hand-written binding's module does not define a function for every
    op of the manifest; names the op and what the module defines."""


class TorchOpsNameError(RegistryError, RuntimeError):
    """torch.ops.<namespace>.<op> is already held, by another kernel or by
    other code in the process (a TORCH_LIBRARY); names the holder and what to
    change. Raised before anything of the kernel is registered."""


class HandWrittenLibraryError(RegistryError, ValueError):
    """A kernel's source defines torch ops itself (TORCH_LIBRARY): refused
    before it is built or loaded, so nothing of it is registered; says to set
    binding = "torch-library" (and namespace) instead."""


class CompilerWarning(UserWarning):
    """What a compiler warned while building a kernel (ptxas's spills and
    serialized wgmma, nvcc's and the host compiler's warnings): shown once,
    after the build that printed it; a cached get builds nothing and says
    nothing. Silence it with warnings.filterwarnings("ignore", category=CompilerWarning)."""


class HeaderPackageMissingError(RegistryError, ModuleNotFoundError):
    """A manifest's header_packages names a package this Python does not have
    installed; says which pip install brings it."""


class BuildEnvironmentError(RegistryError, RuntimeError):
    """This machine cannot build what was asked (no GPU to target, a compiler
    that does not run); says what to set or install."""


def _diagnostic_class():
    class Diagnostic(NamedTuple):
        """One compiler message: where, how bad, what."""

        file: str
        line: int
        column: int | None
        severity: str
        message: str

        def __str__(self) -> str:
            col = f":{self.column}" if self.column else ""
            return f"{self.file}:{self.line}{col}: {self.severity}: {self.message}"

    Diagnostic.__module__, Diagnostic.__qualname__ = __name__, "Diagnostic"  # pickles by name
    return Diagnostic


def __getattr__(name: str):
    # Diagnostic is made on first use: creating a NamedTuple class costs ~0.4 ms,
    # and this module is imported by every `get`, most of which compile nothing.
    if name == "Diagnostic":
        global Diagnostic
        Diagnostic = _diagnostic_class()
        return Diagnostic
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BuildError(RegistryError, RuntimeError):
    """A compile or link failed. The previous version of the op stays usable.

    `diagnostics` lists the compiler's errors with file and line; `log` is
    the compiler's whole output; `command` what was run.
    """

    def __init__(self, kernel: str, what: str, diagnostics: list[Diagnostic], log: str):
        self.kernel, self.what, self.diagnostics, self.log = kernel, what, diagnostics, log
        shown = "\n".join(f"  {d}" for d in diagnostics[:10]) or _tail(log)
        super().__init__(
            f"building {what} of kernel {kernel!r} failed:\n{shown}\n"
            f"Fix the source and call get() again; the op you had keeps working."
        )

    @property
    def first(self) -> "Diagnostic | None":
        return self.diagnostics[0] if self.diagnostics else None


class ArchTargetError(BuildError):
    """Device code compiled for an arch it cannot do its work on (CUTLASS's
    wgmma kernels built for sm_90, not sm_90a: the body is an error printf).
    Nothing is published; the message says which key or target to change."""

    def __init__(self, kernel: str, what: str, arch: str, found: str, advice: str):
        self.kernel, self.what, self.diagnostics, self.log = kernel, what, [], found
        self.arch, self.found = arch, found
        RegistryError.__init__(
            self,
            f"building {what} of kernel {kernel!r} for {arch} gave code that cannot run there: it holds "
            f"{found!r}, the message a kernel body compiled without its instructions prints instead of "
            f"computing. To fix: {advice}. The op you had keeps working."
        )


class LockTimeoutError(RegistryError, TimeoutError):
    def __init__(self, lock_path: str, holder: str, waited: float):
        self.lock_path, self.holder = lock_path, holder
        who = holder or "an unknown process"
        super().__init__(
            f"waited {waited:.0f} s for {who} building the same kernel (lock {lock_path}). "
            f"If that process is stuck, stop it; raise REGISTRY_LOCK_TIMEOUT to wait longer."
        )


def _tail(log: str, lines: int = 30) -> str:
    return "\n".join("  " + line for line in log.strip().splitlines()[-lines:])
