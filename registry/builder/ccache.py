"""Builds through ccache, wired the way torch invokes compilers.

torch's load() reads CXX for C++ units and PYTORCH_NVCC (written verbatim into
build.ninja) for CUDA units. nvcc is wrapped as `ccache <nvcc>`. For C++ a
plain `CXX="ccache g++"` breaks torch's compiler check, so CXX points at a
generated two-line script named like the real compiler, which execs
`ccache <real compiler>`: torch's check sees a g++ and ccache sees the exact
compiler the user had (not whatever PATH finds first).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

from registry import knobs
from registry.environment import nvcc_command

# The process environment is shared: builds that need the same settings (the
# configs registry.tune builds side by side) share one entry; different
# settings wait until the environment is free. `base` is the environment as
# the first sharer found it, which every later one computes its settings from.
_env = threading.Condition()
_env_shared = {"overrides": None, "users": 0, "base": None, "context": None}
# Wrapper script -> the compiler it runs: a build that must not go through
# ccache (direct.py's one compile-and-link step) calls the compiler itself.
_wrapped: dict[str, str] = {}


def ccache_executable() -> str | None:
    return shutil.which("ccache") if knobs.ccache_enabled() else None


def _cxx_wrapper(cache_root: Path, ccache: str, real_cxx: str) -> Path:
    """The wrapper script, checked on every build: its bytes must be exactly
    what this function writes and it must be executable, or it is written
    again (a damaged wrapper would fail every build with "Exec format error")."""
    # The folder names the pair; hashed here, not by the core: a cold get's
    # build should not cross into it for a folder name.
    pair = hashlib.sha256(f"{real_cxx}\0{ccache}".encode()).hexdigest()[:16]
    folder = knobs.cache_path("ccache_bin", cache_root) / pair
    wrapper = folder / Path(real_cxx).name
    text = f'#!/bin/sh\nexec {ccache} {real_cxx} "$@"\n'.encode()
    if not _holds(wrapper, text) or not os.access(wrapper, os.X_OK):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = folder / f".{wrapper.name}.{os.getpid()}.{threading.get_ident()}"
        tmp.write_bytes(text)
        tmp.chmod(0o700)
        os.replace(tmp, wrapper)
    _wrapped[str(wrapper)] = real_cxx
    return wrapper


def unwrapped(compiler: str) -> str:
    """The compiler a wrapper script of _cxx_wrapper runs; any other name as given."""
    return _wrapped.get(compiler, compiler)


def remote_storage_configured(team=None) -> bool:
    """Whether a compile through ccache could be served from, or shared with,
    remote storage: CCACHE_REMOTE_STORAGE set, the team's remote available
    (compiler_environment then sets it), or ccache's own configuration naming
    one. Without any, ccache is a local cache only, which the registry's own
    content-keyed cache already covers for a library built in one step."""
    if os.environ.get("CCACHE_REMOTE_STORAGE") or (team is not None and team.available()):
        return True
    ccache = ccache_executable()
    return ccache is not None and _configured_remote_storage(ccache, _config_state())


def _config_state() -> tuple:
    """What ccache's configuration depends on: the variables that locate its
    files, and each candidate file's size and mtime (asked again when any changes)."""
    names = ("CCACHE_CONFIGPATH", "CCACHE_DIR", "XDG_CONFIG_HOME", "HOME")
    env = tuple(os.environ.get(n) for n in names)
    home = os.path.expanduser("~")
    candidates = [os.environ.get("CCACHE_CONFIGPATH"), "/etc/ccache.conf", "/usr/local/etc/ccache.conf",
                  os.path.join(os.environ.get("CCACHE_DIR") or "", "ccache.conf"),
                  os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "ccache", "ccache.conf"),
                  os.path.join(home, ".ccache", "ccache.conf")]
    files = []
    for path in candidates:
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        files.append((path, st.st_size, st.st_mtime_ns) if st else (path, None))
    return env + tuple(files)


@functools.lru_cache(maxsize=8)
def _configured_remote_storage(ccache: str, _state: tuple) -> bool:
    # `ccache -k` reads the configuration exactly as a compile would (3-10 ms,
    # so once per configuration state). ccache before 4.4 calls it secondary_storage.
    for name in ("remote_storage", "secondary_storage"):
        done = subprocess.run([ccache, "-k", name], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return bool(done.stdout.strip())
    return False


def _holds(path: Path, content: bytes) -> bool:
    try:
        return path.read_bytes() == content
    except OSError:
        return False


@contextlib.contextmanager
def compiler_environment(cache_root: Path, cuda_arch: str | None, recache: bool = False,
                         team=None, source_dir: str | None = None):
    """Sets what torch's load() reads from the environment for one build:
    CXX / PYTORCH_NVCC through ccache, and TORCH_CUDA_ARCH_LIST to the
    architecture the key was computed for. `recache` (a forced rebuild) makes
    ccache compile for real and store the fresh result. With `team` (a
    remote.RemoteCache) ccache also uses that Redis as its remote storage.
    The base directory widens to cover `source_dir` (the kernel's folder), so
    that checkouts at different paths share results, through the team's
    storage or one machine's ccache."""
    ccache = ccache_executable()
    with _env:
        while True:
            env = _env_shared["base"] if _env_shared["users"] else os.environ
            overrides = _overrides(env, ccache, cache_root, cuda_arch, recache, team, source_dir)
            if _env_shared["users"] == 0 or overrides == _env_shared["overrides"]:
                break
            _env.wait()
        if _env_shared["users"] == 0:
            _env_shared.update(overrides=overrides, base=dict(os.environ),
                               context=knobs.environment_overrides(overrides))
            _env_shared["context"].__enter__()
        _env_shared["users"] += 1
    try:
        yield ccache
    finally:
        with _env:
            _env_shared["users"] -= 1
            if _env_shared["users"] == 0:
                _env_shared["context"].__exit__(None, None, None)
                _env_shared.update(overrides=None, base=None, context=None)
                _env.notify_all()


def _overrides(env, ccache, cache_root: Path, cuda_arch, recache: bool, team, source_dir) -> dict[str, str]:
    # Newer torch prepends ccache to its compilers by itself; the wiring
    # here is exact (the user's compiler, nvcc wrapped, recache on force),
    # so turn torch's off rather than run ccache twice.
    overrides = {"TORCH_NO_COMPILER_WRAPPER": "1"}
    if cuda_arch:
        overrides["TORCH_CUDA_ARCH_LIST"] = cuda_arch
    if ccache:
        cxx = env.get("CXX") or "c++"  # cxx_command() of `env`: the user's compiler, never our own wrapper
        real_cxx = cxx if "/" in cxx else (shutil.which(cxx) or cxx)
        overrides["CXX"] = str(_cxx_wrapper(cache_root, ccache, os.path.realpath(real_cxx)))
        if cuda_arch and "PYTORCH_NVCC" not in env:
            overrides["PYTORCH_NVCC"] = f"{ccache} {nvcc_command()}"
        if recache:
            overrides["CCACHE_RECACHE"] = "1"
        # Generated bindings live under the cache root and builds run in a
        # staging folder inside it: with the root as base dir ccache sees
        # the same relative paths from any cache root, so a new cache dir
        # still hits.
        if "CCACHE_BASEDIR" not in env:
            overrides["CCACHE_BASEDIR"] = base_dir(cache_root, source_dir)
        # ccache hashes the working directory of a compile that writes debug
        # info (-g; nvcc's host side too), and every build runs in a fresh
        # staging folder: no such compile would ever hit. The folder's name
        # is all that is left out (content, flags and relative paths are
        # still hashed), and it names nothing once the build is published.
        if "CCACHE_HASHDIR" not in env and "CCACHE_NOHASHDIR" not in env:
            overrides["CCACHE_NOHASHDIR"] = "1"
        if team is not None and team.available() and "CCACHE_REMOTE_STORAGE" not in env:
            overrides["CCACHE_REMOTE_STORAGE"] = team.ccache_storage()
    return overrides


def base_dir(cache_root: Path, source_dir: str | None) -> str:
    """ccache's base directory: paths under it reach the compiler relative to
    the build's staging folder (<cache>/v1/tmp/<one level>), so two builds see
    the same command line wherever their folders are, as long as the kernel
    sits in the same place relative to the cache. That holds for two
    checkouts each with its own cache inside (the default, <checkout>/cache),
    and for a kernel inside the cache (the %%kernel magic's). Without a
    source folder, or when the two share only "/" (which ccache advises
    against), the cache root."""
    root = os.path.abspath(cache_root)
    if source_dir is None:
        return root
    common = os.path.commonpath([root, os.path.abspath(source_dir)])
    return common if common != os.path.dirname(common) else root


def stats() -> dict[str, int]:
    """ccache's own counters (`ccache --print-stats`), e.g. direct_cache_hit."""
    ccache = shutil.which("ccache")
    if ccache is None:
        return {}
    out = subprocess.run([ccache, "--print-stats"], capture_output=True, text=True, check=False).stdout
    counters = {}
    for line in out.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isdigit():
            counters[name] = int(value)
    return counters


def hit_rate(counters: dict[str, int]) -> tuple[int, int]:
    """(hits, misses) from stats()."""
    hits = counters.get("direct_cache_hit", 0) + counters.get("preprocessed_cache_hit", 0)
    return hits, counters.get("cache_miss", 0)


def remote_hit_rate(counters: dict[str, int]) -> tuple[int, int]:
    """(hits, misses) of ccache's remote storage, from stats()."""
    return counters.get("remote_storage_hit", 0), counters.get("remote_storage_miss", 0)


def delta(before: dict[str, int], after: dict[str, int], remote_storage: bool = False) -> tuple[int, ...]:
    """(hits, misses) between two stats(), then the remote storage's
    (hits, misses) when `remote_storage`."""
    pairs = [hit_rate] + ([remote_hit_rate] if remote_storage else [])
    return tuple(a - b for rate in pairs for a, b in zip(rate(after), rate(before)))
