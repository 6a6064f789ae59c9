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
        "Install the package (`./dev deps` in a checkout, or `pip install .`; see README.md)."
    ) from error

from registry.api import get, list, status  # noqa: A004

__all__ = [
    "get", "list", "status", "Op", "OpGroup", "KernelInfo",
    "RegistryError", "BuildError", "KernelNotFoundError", "LockTimeoutError", "ManifestError",
    "sweep", "watch",
]

# The rest loads on first use, so `import registry` stays a few milliseconds.
_LAZY = {
    "Op": "registry.op", "OpGroup": "registry.op", "KernelInfo": "registry.api",
    "RegistryError": "registry.errors", "BuildError": "registry.errors",
    "KernelNotFoundError": "registry.errors", "LockTimeoutError": "registry.errors",
    "ManifestError": "registry.errors",
    "sweep": "registry.dtype_sweep", "watch": "registry.watcher",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'registry' has no attribute {name!r}")
