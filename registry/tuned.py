"""Using registry.tune's winners at get time: the tuned table of this kernel
version (its format: registry/core/tuned_table.h), each winning config's
kernel library loaded, and the op's launcher table swapped for a routed copy
(core/launcher_table.h): the binding picks the winner's launcher for the
call's dtype and shape bucket in C++, on the fast entry and the dispatcher's
path alike. No Python runs per call; an untuned table costs the binding one
branch (route_count == 0).

Imported by a slow-path get only for a kernel whose manifest has a [tune] table.
"""
from __future__ import annotations

from pathlib import Path

from registry import _core, knobs
from registry.state import STATE

# routed table address -> the default config's table it copies (tuning again
# in one process routes from the default, never from an earlier routing).
_BASE_TABLES = {}


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
    from registry.remote import team_cache as remote

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


def untuned_table(op):
    """The default config's launcher table of a (possibly routed) op handle."""
    return _BASE_TABLES.get(op._table.address, op._table)


def config_manifest(manifest, backend: str, config, dtype: str):
    """The build of a win: `config` with `dtype`'s own units only, where the
    kernel has one per dtype (core/dtype_units.h), as registry.tune built it."""
    return _core.with_dtypes(_core.with_config(manifest, config), backend, [dtype])


def apply(name: str, backend: str, manifest, key: str, ops: dict, resolve_config) -> str:
    """Installs the winners of the table for `key` into `ops` (the default
    config's handles). resolve_config(config, dtype) -> the ops of that
    config's build for dtype (config_manifest; loaded, cached builds).
    Returns the line status() shows."""
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
    variants = {(label, dtype): ops if label == default_label else resolve_config(_core.parse_config_label(label),
                                                                                  dtype)
                for label, dtype in sorted({(w.config, w.dtype) for w in wins})}
    for op_name, op in ops.items():
        if op._table is None:  # a pybind module's function: no table to route
            continue
        base = _BASE_TABLES.get(op._table.address, op._table)
        routes = []
        for w in wins:
            if w.op != op_name or w.config == default_label or w.bucket == "scalar":
                continue
            winner = variants[(w.config, w.dtype)][op_name]
            STATE.retired_tables.append(winner._table)  # its launcher runs from the routed table: keep it
            routes.append((w.dtype, w.bucket, winner._table.launcher(w.dtype)))
        routed = _core.routed_launcher_table(base, routes) if routes else base
        if routed is not op._table:
            _BASE_TABLES[routed.address] = base
            if base.address in STATE.fakes_by_table:  # the Meta kernel finds the op's fake by the table
                STATE.fakes_by_table[routed.address] = STATE.fakes_by_table[base.address]
            op._swap(op._fn, routed, op.backend, op.key, fast=op._fast_entry)
    buckets = ", ".join(f"{w.op} {w.dtype} {w.bucket}: {w.config}" for w in wins)
    return f"in use: {table_path(name, backend, key)} ({len(wins)} wins on {arch}: {buckets})"
