"""Using registry.tune's winners at get time: the tuned table of this kernel
version (its format: registry/core/tuned_table.h), each winning config's
kernel library loaded, and the op's fast entry replaced by a dispatch on
(dtype, shape bucket) to the winner's launcher table.

Imported by a slow-path get only for a kernel whose manifest has a [tune]
table. The dispatch is the only per-call work a tuned op adds: one Python
call, one (dtype, shape) dict lookup; an untuned op's call is unchanged.
"""
from __future__ import annotations

from pathlib import Path

from registry import _core, knobs

# Different shapes seen by one tuned op before its shape cache stops growing
# (a bucket is then computed per call: correct, only slower).
SHAPE_CACHE_LIMIT = 4096


def tuned_dir(cache_root: Path | None = None) -> str:
    return str(knobs.cache_path("tuned", cache_root))


def device_arch(backend: str) -> str:
    """What a win is keyed by besides the shape: "cpu", or the GPU's sm_XY."""
    if backend != "cuda":
        return "cpu"
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def table_path(kernel: str, backend: str, key: str, cache_root: Path | None = None) -> str:
    return _core.tuned_table_path(tuned_dir(cache_root), kernel, backend, key)


def remote_name(path: str, cache_root: Path | None = None) -> str:
    """The table's name in the team cache: its path below the cache root (v1/tuned/...)."""
    return str(Path(path).relative_to(knobs.cache_dir() if cache_root is None else cache_root))


def read_table(kernel: str, backend: str, key: str, cache_root: Path | None = None):
    """This kernel version's table: the local one, else the team's (kept locally), else None."""
    path = table_path(kernel, backend, key, cache_root)
    table = _core.read_tuned_table(path)
    if table is not None or knobs.remote_cache() is None:
        return table
    from registry import remote

    team = remote.current()
    data = team.get_file(remote_name(path, cache_root)) if team is not None and team.available() else None
    if data is None:
        return None
    try:
        table = _core.parse_tuned_table(data.decode())
    except UnicodeDecodeError:
        return None
    # Only a table of exactly this kernel version is used (never one measured on other code).
    if table is None or (table.kernel, table.backend, table.key) != (kernel, backend, key):
        return None
    _core.write_tuned_table(path, table)
    return table


def apply(name: str, backend: str, manifest, key: str, ops: dict, resolve_config) -> str:
    """Installs the winners of the table for `key` into `ops` (the default
    config's handles). resolve_config(config) -> that config's ops (loaded,
    cached builds). Returns the line status() shows."""
    table = read_table(name, backend, key)
    if table is None:
        stale = _core.other_tuned_keys(tuned_dir(), name, backend, key)
        if stale:
            return (f"stale: tuned for other code (key {stale[0][:12]}), not for this key; the default config "
                    f"{_core.config_label(manifest.config)} runs. Tune again: registry.tune({name!r}, shapes=...)")
        return f"not tuned; the default config {_core.config_label(manifest.config)} runs"
    arch = device_arch(backend)
    wins = [w for w in table.wins if w.arch == arch]
    if not wins:
        return f"tuned for {', '.join(sorted({w.arch for w in table.wins}))}, not {arch}; the default config runs"
    default_label = _core.config_label(manifest.config)
    variants = {label: ops if label == default_label else resolve_config(_core.parse_config_label(label))
                for label in sorted({w.config for w in wins})}
    for op_name, op in ops.items():
        routes = {(w.dtype, w.bucket): variants[w.config][op_name]._fast
                  for w in wins if w.op == op_name and op_name in variants[w.config]}
        routes = {k: f for k, f in routes.items() if f is not None}
        base = getattr(op._fast, "default", op._fast)  # tuned again in this process: the plain entry
        if base is not None:
            op._fast = dispatch(base, routes, op._tensor_index[0] if op._tensor_index else 0) if routes else base
            op._fast.variants = list(variants.values())  # their launcher tables must outlive the routes
    buckets = ", ".join(f"{w.op} {w.dtype} {w.bucket}: {w.config}" for w in wins)
    return f"in use: {table_path(name, backend, key)} ({len(wins)} wins on {arch}: {buckets})"


def dispatch(default_fast, routes: dict, index: int):
    """A fast entry that calls the winner of the call's (dtype, shape bucket),
    else the default. routes: (dtype name, bucket) -> a fast entry."""
    by_shape = {}
    bucket = _core.shape_bucket

    def call(*args):
        try:
            t = args[index]
            fast = by_shape.get((t.dtype, t.shape))
        except (AttributeError, IndexError, TypeError):  # not a Tensor: the default's entry says what is wrong
            return default_fast(*args)
        if fast is None:
            fast = routes.get((str(t.dtype).removeprefix("torch."), bucket(list(t.shape))), default_fast)
            if len(by_shape) < SHAPE_CACHE_LIMIT:
                by_shape[(t.dtype, t.shape)] = fast
        return fast(*args)

    call.routes, call.default = routes, default_fast
    return call
