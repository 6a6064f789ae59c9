"""A JIT kernel registry for notebooks.

    import registry
    axpy = registry.get("axpy")      # build or load, return a ready op
    out = axpy(x, y, 1.5)
    registry.status("axpy")          # key, hit or build, what changed

See README.md and ARCHITECTURE.md.
"""
try:
    from registry import _core  # noqa: F401
except ImportError as error:  # pragma: no cover - a checkout without the built core
    raise ImportError(
        "registry's C++ core (registry/_core) is not built for this Python. "
        "Run `make core` in the checkout (see README.md)."
    ) from error

from registry.api import KernelInfo, get, list, status
from registry.errors import BuildError, KernelNotFoundError, LockTimeoutError, ManifestError, RegistryError
from registry.op import Op, OpGroup

__all__ = [
    "get", "list", "status", "Op", "OpGroup", "KernelInfo",
    "RegistryError", "BuildError", "KernelNotFoundError", "LockTimeoutError", "ManifestError",
]
