"""Every environment variable the registry reads, declared once.

Read through these functions (not os.environ) so tests can scope a knob with
monkeypatch.setenv and so the documentation below stays the whole list. The
process environment is written here only (put_kernel_root_first,
environment_overrides; tests/test_import_rules.py checks it), so whatever
changes it is found in one file.

REGISTRY_CACHE_DIR     cache root (default: <checkout>/cache in a checkout or an
                       editable install, else $XDG_CACHE_HOME/kernel-registry)
REGISTRY_KERNELS_PATH  extra kernel roots, os.pathsep-separated, searched
                       before ./kernels (beside the working directory, e.g. a
                       notebook's own) and <checkout>/kernels
REGISTRY_DEVICE        "cpu" or "cuda": which backend `get` builds when the
                       call does not say (default: cuda when available)
REGISTRY_CCACHE        "0" turns ccache off (default: on when ccache is found)
REGISTRY_LOCK_TIMEOUT  seconds a build waits for another process building the
                       same key before giving up (default: 600)
REGISTRY_VERBOSE       "1" prints the build commands
REGISTRY_NVRTC         a libnvrtc.so to compile device code with (compiler = "nvrtc");
                       default: the one in torch's nvidia wheels (registry/device/nvrtc.py)
REGISTRY_CACHE_MAX_BYTES  cache size cap, e.g. 20G or 500M; least recently used
                       entries that no live process has loaded are removed
                       after each build (default: 20G)
REGISTRY_REMOTE_CACHE  redis://[user:password@]host[:port][/db]: a team's shared
                       cache. Artifacts missing locally are fetched (verified)
                       from it, builds are stored in it, and compiles go through
                       ccache's remote storage on it (default: none)
REGISTRY_REMOTE_CACHE_MODE  "read-write" (default) or "read-only": only fetch,
                       never store (CI, readers without write access)
REGISTRY_REMOTE_TIMEOUT  seconds any one network wait on the remote cache may
                       take before the registry goes on locally (default: 1)
REGISTRY_ISOLATE       "1": every `get` returns isolated ops, whose launchers run
                       in a worker process (registry/isolation/; default: 0)
REGISTRY_ISOLATE_TIMEOUT  seconds an isolated call may run before its worker is
                       killed and the call raises KernelFault (default: 30)
REGISTRY_ISOLATE_CUDA_CHANNEL  "1" (the default): isolated CUDA calls go
                       through the shared-memory call channel, C++ on both
                       sides, as CPU calls do; "0": over the worker's socket
                       (on the H200 an isolated call costs 36-66 us more
                       than the normal op over the socket, ~15 us over the
                       channel with the output canaries).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from registry import _core


PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
# The kernel ABI headers (kreg/*.h) every kernel library compiles against.
REGISTRY_INCLUDE = PACKAGE / "include"
# A checkout (or an editable install of one) has kernels/ beside the package;
# a wheel installed into site-packages does not, and must not write there.
IN_CHECKOUT = (CHECKOUT / "kernels").is_dir()


def cache_dir() -> Path:
    chosen = os.environ.get("REGISTRY_CACHE_DIR")
    if chosen:
        return Path(chosen)
    if IN_CHECKOUT:
        return CHECKOUT / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernel-registry"


def cache_path(what: str, root: Path | str | None = None) -> Path:
    """A path inside the cache root (`root`, else cache_dir()). `what` names
    an entry of _core.CACHE_LAYOUT: "generated", "toolchains", "cuda_arch",
    "inline", "tmp", "ccache_bin", "objects", "memo", "root", ... The layout
    (and its version folder, "v1") is defined once, in core/cache_store.h."""
    return Path(cache_dir() if root is None else root) / _core.CACHE_LAYOUT[what]


def kernel_roots() -> list[Path]:
    """Where kernels are found, in order (an earlier root shadows a later one
    of the same kernel name): REGISTRY_KERNELS_PATH, the working directory's
    kernels/ (a notebook runs beside its own), the checkout's kernels/."""
    extra = [Path(p) for p in os.environ.get("REGISTRY_KERNELS_PATH", "").split(os.pathsep) if p]
    try:
        here = [Path.cwd() / "kernels"]
    except OSError:  # the working directory was removed
        here = []
    roots = []
    for root in [*extra, *here, CHECKOUT / "kernels"]:
        if root not in roots:
            roots.append(root)
    return roots


def put_kernel_root_first(root: Path | str) -> None:
    """Search `root` before every other kernel root (REGISTRY_KERNELS_PATH,
    read by every get), unless it is already listed: the %%kernel magic's
    folder, the quickstart's scratch copy."""
    current = [p for p in os.environ.get("REGISTRY_KERNELS_PATH", "").split(os.pathsep) if p]
    if str(root) not in current:
        os.environ["REGISTRY_KERNELS_PATH"] = os.pathsep.join([str(root), *current])


@contextlib.contextmanager
def environment_overrides(overrides: dict[str, str]):
    """Sets `overrides` in the process environment for the `with` block (what
    a compiler that torch's load() starts reads: CXX, TORCH_CUDA_ARCH_LIST,
    CCACHE_*), then restores what was there. Not thread-safe by itself: the
    caller serializes (ccache.compiler_environment)."""
    saved = {k: os.environ.get(k) for k in overrides}
    _USER_VALUES.update(saved)  # before the overrides: user_env never sees them
    os.environ.update(overrides)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for k in saved:
            _USER_VALUES.pop(k, None)


_USER_VALUES: dict[str, str | None] = {}  # while overrides are set: what the variables held before


def user_env(name: str) -> str | None:
    """An environment variable as the user set it. While a build's overrides
    are in place (environment_overrides: CXX is our ccache wrapper, say) it is
    the value from before them, so that a key computed in one thread while
    another thread builds covers the user's compiler, never the wrapper."""
    if name in _USER_VALUES:
        return _USER_VALUES[name]
    return os.environ.get(name)


def device() -> str | None:
    """REGISTRY_DEVICE: "cpu", "cuda" or None."""
    value = os.environ.get("REGISTRY_DEVICE", "").strip().lower()
    if value and value not in ("cpu", "cuda"):
        raise _setting_error(f"REGISTRY_DEVICE must be 'cpu' or 'cuda', not {value!r}")
    return value or None


def requested_device(named: str | None) -> str | None:
    """The device a request asks for: the one the caller named, else
    REGISTRY_DEVICE, else None (the default: environment.backend_for's rule)."""
    return named or device()


def nvrtc_library() -> str | None:
    """REGISTRY_NVRTC: a libnvrtc.so to compile device code with, or None (the nvidia wheel's)."""
    return os.environ.get("REGISTRY_NVRTC", "").strip() or None


def ccache_enabled() -> bool:
    return os.environ.get("REGISTRY_CCACHE", "1") != "0"


def lock_timeout() -> float:
    return float(os.environ.get("REGISTRY_LOCK_TIMEOUT", "600"))


def verbose() -> bool:
    return os.environ.get("REGISTRY_VERBOSE", "0") == "1"


# REGISTRY_CACHE_MAX_BYTES  the cache's size cap: after each publish, least
#                           recently used entries no live process has loaded
#                           are removed until it fits (default: 20G)
_SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def cache_max_bytes() -> int:
    return parse_size(os.environ.get("REGISTRY_CACHE_MAX_BYTES", "").strip() or "20G", "REGISTRY_CACHE_MAX_BYTES")


def parse_size(text: str, what: str) -> int:
    """Bytes from "1048576", "500M", "20G" or "1.5GiB" (suffixes are powers of 1024)."""
    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, suffix = (value[:-1], value[-1]) if value[-1:] in ("K", "M", "G", "T") else (value, "")
    try:
        size = int(float(number) * _SIZE_SUFFIXES[suffix])
    except (ValueError, OverflowError):
        raise _setting_error(f"{what} must be a size such as 20G, 500M or 1048576, not {text!r}") from None
    if size < 0:
        raise _setting_error(f"{what} must not be negative, got {text!r}")
    return size


# REGISTRY_REMOTE_CACHE, REGISTRY_REMOTE_CACHE_MODE, REGISTRY_REMOTE_TIMEOUT:
# see the top of this file and registry/remote/team_cache.py.
def remote_cache() -> str | None:
    return os.environ.get("REGISTRY_REMOTE_CACHE", "").strip() or None


def remote_mode() -> str:
    value = os.environ.get("REGISTRY_REMOTE_CACHE_MODE", "").strip().lower() or "read-write"
    if value not in ("read-write", "read-only"):
        raise _setting_error(f"REGISTRY_REMOTE_CACHE_MODE must be 'read-write' or 'read-only', not {value!r}")
    return value


def remote_timeout() -> float:
    return _positive_seconds("REGISTRY_REMOTE_TIMEOUT", os.environ.get("REGISTRY_REMOTE_TIMEOUT", "").strip() or "1")


# os.environ's own dict, and REGISTRY_ISOLATE's key as it stores it: every `get`
# asks whether the variable is set, and `name in os.environ` raises and catches
# a KeyError when it is not (~3 us); a lookup here is ~0.05 us and sees what
# os.environ[...] = and monkeypatch.setenv write. Where os.environ keeps no such
# dict, ENVIRON_DATA always "contains" the key and isolate() reads the variable.
ENVIRON_DATA = getattr(os.environ, "_data", None)
ISOLATE_KEY = os.environ.encodekey("REGISTRY_ISOLATE") if hasattr(os.environ, "encodekey") else None
if not isinstance(ENVIRON_DATA, dict) or ISOLATE_KEY is None:
    ENVIRON_DATA, ISOLATE_KEY = {None: ""}, None


def isolate() -> bool:
    """REGISTRY_ISOLATE (also what `%registry isolate on|off` sets)."""
    value = os.environ.get("REGISTRY_ISOLATE")
    if value is None:
        return False
    value = value.strip().lower()
    if value not in ("0", "1", "", "on", "off", "true", "false"):
        raise _setting_error(f"REGISTRY_ISOLATE must be 1 or 0, not {value!r}")
    return value in ("1", "on", "true")


_isolate_timeout = ("", 30.0)  # (the setting's text, its value): read on every isolated call


def set_isolate(on: bool) -> None:
    """What `%registry isolate on|off` does: the setting every later get reads."""
    os.environ["REGISTRY_ISOLATE"] = "1" if on else "0"


def isolate_timeout() -> float:
    global _isolate_timeout
    raw = os.environ.get("REGISTRY_ISOLATE_TIMEOUT", "")
    if raw == _isolate_timeout[0]:
        return _isolate_timeout[1]
    value = _positive_seconds("REGISTRY_ISOLATE_TIMEOUT", raw.strip() or "30")
    _isolate_timeout = (raw, value)
    return value


def isolate_cuda_channel() -> bool:
    """REGISTRY_ISOLATE_CUDA_CHANNEL, read when a CUDA worker starts: 1 (the
    default) sends its calls through the shared-memory call channel, 0 keeps
    the socket (what every CUDA call took before; a way back if the channel
    misbehaves on some driver)."""
    value = os.environ.get("REGISTRY_ISOLATE_CUDA_CHANNEL", "1").strip()
    if value not in ("0", "1", ""):
        raise _setting_error(f"REGISTRY_ISOLATE_CUDA_CHANNEL must be 1 or 0, not {value!r}")
    return value != "0"


def _positive_seconds(name: str, text: str) -> float:
    """`text`, the value of the variable `name`, read as a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:  # nan too
        raise _setting_error(f"{name} must be a positive number of seconds, not {text!r}")
    return value


def _setting_error(message: str) -> Exception:
    # registry.errors is imported where an error is raised, not on import: a
    # fresh process's cached `get` never raises one and should not load it.
    from registry.errors import SettingError

    return SettingError(message)
