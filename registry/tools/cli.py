"""`python -m registry`: kernels and the cache from a shell.

  python -m registry list
  python -m registry build NAME [--device cpu|cuda] [--rebuild]
  python -m registry status NAME [--device cpu|cuda]
  python -m registry aot NAME --out DIR [--backend cpu|cuda]...
  python -m registry aot NAME --wheel DIR [--backend cpu|cuda]...
  python -m registry aot NAME --hf-kernels DIR [--out DIR] [--backend cpu|cuda]... [--license SPDX]
  python -m registry aot NAME --hf-kernels DIR --stable-abi [--backend cpu|cuda]... [--license SPDX]
  python -m registry cache ls [--json]
  python -m registry cache info
  python -m registry cache gc [--max-bytes SIZE]
  python -m registry cache clear --yes
  python -m registry remote info
  python -m registry remote ls NAME [--json]

Exit codes: 0 ok; 1 a build, manifest or cache failure (the message is on
stderr); 2 a usage error; 3 no kernel of that name.

The cache commands never import torch, so they answer in a fraction of a
second; build and status load the kernel like a notebook's `get` would.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # as a shell reports a process stopped by Ctrl-C


def _layout_exists(root) -> bool:
    from registry import knobs

    return knobs.cache_path("root", root).is_dir()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # exits with 2 on a usage error
    from registry.errors import KernelNotFoundError, RegistryError

    try:
        return args.run(args)
    except KernelNotFoundError as error:
        return _fail(error, EXIT_NOT_FOUND)
    except BrokenPipeError:
        # `... | head` stopped reading: not worth an error. Point stdout at
        # /dev/null so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    # Every error of the registry, the core's included, is a RegistryError and
    # says what to do next. OSError is the machine's (a folder that cannot be
    # written, a full disk) and names its path: also a message, not a traceback.
    except (RegistryError, OSError) as error:
        return _fail(error, EXIT_FAILED)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    # Anything else is a defect of the registry, not of the user's input: still
    # one line (a command line prints no traceback), saying how to report it.
    except Exception as error:  # noqa: BLE001
        return _fail(f"unexpected {type(error).__name__}: {error} (a defect of the registry, not of your "
                     f"kernel: please report it with the command you ran)", EXIT_FAILED)


def _fail(error: "Exception | str", code: int) -> int:
    print(f"error: {error}", file=sys.stderr)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m registry",
        description="The kernel registry: build kernels and manage the artifact cache.",
        epilog="Exit codes: 0 ok, 1 build/manifest/cache failure, 2 usage error, 3 kernel not found.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser("list", help="the kernels the registry can find")
    listing.set_defaults(run=_list)

    for name, run, what in (("build", _build, "build (or load from the cache) a kernel and say what happened"),
                            ("status", _status, "load a kernel, then print its status: key, paths, what changed")):
        sub = commands.add_parser(name, help=what, description=what)
        sub.add_argument("name", help="the kernel's name (its folder under kernels/)")
        sub.add_argument("--device", choices=("cpu", "cuda"),
                         help="which backend (default: REGISTRY_DEVICE, else cuda when available)")
        if name == "build":
            sub.add_argument("--rebuild", action="store_true", help="compile again even if nothing changed")
        sub.set_defaults(run=run)

    aot = commands.add_parser("aot", help="export a kernel as an installable package (no JIT at run time)",
                              description="write a setuptools package that registers torch.ops.NAME when imported, "
                                          "(--wheel) a prebuilt wheel for every torch from 2.11 on, or "
                                          "(--hf-kernels) build it into the Hugging Face kernels layout")
    aot.add_argument("name", help="the kernel's name (its folder under kernels/)")
    aot.add_argument("--out", metavar="DIR",
                     help="the package folder to write (created; a previous export there is replaced)")
    aot.add_argument("--wheel", metavar="DIR",
                     help="write a prebuilt wheel (torch's stable ABI, cp310-abi3) into DIR: the JIT's own builds, "
                          "for every torch from 2.11 on and every Python from 3.10 on; nothing compiles at install")
    aot.add_argument("--hf-kernels", metavar="DIR",
                     help="build the package and write it in the Hugging Face kernels layout, DIR/build/<variant>/, "
                          "which kernels.get_local_kernel(DIR) loads (--out also keeps the source package)")
    aot.add_argument("--stable-abi", action="store_true",
                     help="with --hf-kernels: torch-stable-abi211 variants, the wheel's package (--wheel), which "
                          "kernels loads for torch 2.11 and every later torch")
    aot.add_argument("--license", metavar="SPDX",
                     help="with --hf-kernels: the license metadata.json names, e.g. Apache-2.0 (default: NOASSERTION)")
    aot.add_argument("--backend", action="append", choices=("cpu", "cuda"), dest="backends",
                     help="export only this backend (repeatable; default: every backend the manifest has)")
    aot.set_defaults(run=_aot, parser=aot)

    cache = commands.add_parser("cache", help="inspect or trim the artifact cache")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True, metavar="CACHE_COMMAND")
    ls = cache_commands.add_parser("ls", help="every cache entry, most recently used first")
    ls.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    ls.set_defaults(run=_cache_ls)
    info = cache_commands.add_parser("info", help="where the cache is, how big, its cap, ccache's counters")
    info.set_defaults(run=_cache_info)
    gc = cache_commands.add_parser("gc", help="remove least recently used entries until the cache fits its cap")
    gc.add_argument("--max-bytes", type=_size_argument, metavar="SIZE",
                    help="the cap for this run, e.g. 500M or 1048576 (default: REGISTRY_CACHE_MAX_BYTES, 20G)")
    gc.set_defaults(run=_cache_gc)
    clear = cache_commands.add_parser("clear", help="remove every entry no live process has loaded")
    clear.add_argument("--yes", action="store_true", help="confirm: the next get of each kernel compiles again")
    clear.set_defaults(run=_cache_clear, parser=clear)

    remote = commands.add_parser("remote", help="the team's shared cache (REGISTRY_REMOTE_CACHE)")
    remote_commands = remote.add_subparsers(dest="remote_command", required=True, metavar="REMOTE_COMMAND")
    remote_info = remote_commands.add_parser("info", help="where it is, whether it answers, ccache's remote counters")
    remote_info.set_defaults(run=_remote_info)
    remote_ls = remote_commands.add_parser("ls", help="what the remote cache stores for one kernel")
    remote_ls.add_argument("name", help="the kernel's name")
    remote_ls.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    remote_ls.set_defaults(run=_remote_ls)
    return parser


def _size_argument(text: str) -> int:
    from registry import knobs

    try:
        return knobs.parse_size(text, "--max-bytes")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ---- kernels ---------------------------------------------------------------


def _list(args) -> int:
    import registry
    from registry import knobs

    kernels = registry.list()
    for info in kernels:
        print(info)  # "name  manifest"; a folder that cannot be a kernel says why
    if not kernels:
        roots = ", ".join(str(r) for r in knobs.kernel_roots())
        print(f"no kernels found in {roots}; a kernel is a folder holding a kernel.toml", file=sys.stderr)
    return EXIT_OK


def _build(args) -> int:
    import registry

    registry.get(args.name, rebuild=args.rebuild, device=args.device)
    print(registry.status(args.name, device=args.device))
    return EXIT_OK


def _status(args) -> int:
    import registry

    registry.get(args.name, device=args.device)
    print(registry.status(args.name, device=args.device))
    return EXIT_OK


def _aot(args) -> int:
    from registry.tools.aot import export_package

    if args.wheel and (args.hf_kernels or args.out or args.license):
        args.parser.error("--wheel writes a wheel alone: leave out --out, --hf-kernels and --license")
    if args.stable_abi and not args.hf_kernels:
        args.parser.error("--stable-abi is for --hf-kernels (a wheel is always on the stable ABI)")
    if args.wheel:
        return _wheel(args)
    if args.hf_kernels:
        return _hf_kernels(args)
    if not args.out:
        args.parser.error("give --out DIR (an installable package), --wheel DIR (a prebuilt wheel) or "
                          "--hf-kernels DIR (the Hugging Face layout)")
    if args.license:
        args.parser.error("--license is for --hf-kernels (a setuptools package names none)")
    path = export_package(args.name, args.out, backends=args.backends)
    print(f"wrote {path}; build it where it will run: python -m pip install --no-build-isolation {path}")
    return EXIT_OK


def _wheel(args) -> int:
    from registry.tools.aot_wheel import export_wheel

    path = export_wheel(args.name, args.wheel, backends=args.backends)
    print(f"wrote {path}; install it where it will run (torch >= 2.11): python -m pip install {path}")
    return EXIT_OK


def _hf_kernels(args) -> int:
    from registry.tools import hf_export

    if args.stable_abi:
        if args.out:
            args.parser.error("--stable-abi writes the prebuilt package alone: leave out --out")
        from registry.tools.hf_stable import export_hf_stable

        variants = export_hf_stable(args.name, args.hf_kernels, backends=args.backends,
                                    license=args.license or hf_export.NO_LICENSE)
    else:
        print(f"building {args.name}'s package (a minute or more: the compiler runs for each backend)",
              file=sys.stderr)
        variants = hf_export.export_hf_kernel(args.name, args.hf_kernels, backends=args.backends, source_dir=args.out,
                                              license=args.license or hf_export.NO_LICENSE)
    for variant in variants:
        print(f"wrote {variant}")
    # Without a CUDA variant, backend="cpu": a CUDA torch would otherwise look for one.
    cpu_only = all("-cpu-" in v.name for v in variants)
    print(f"load it with: kernels.get_local_kernel(pathlib.Path({str(variants[0].parent.parent)!r})"
          f"{', backend=' + repr('cpu') if cpu_only else ''})")
    return EXIT_OK


# ---- cache -----------------------------------------------------------------


def _store():
    """The cache store, or None when no cache exists yet (a command that only
    looks must not create one)."""
    from registry import _core, knobs

    root = knobs.cache_dir()
    if not knobs.cache_path("root", root).is_dir():
        return None
    return _core.CacheStore(str(root))


def _entries(store) -> list[dict]:
    rows = []
    for e in store.list() if store else []:
        rows.append({
            "key": e.key, "kernel": e.kernel, "backend": e.backend, "kind": e.kind,
            "artifact": e.artifact, "artifact_size": e.artifact_size, "disk_bytes": e.disk_bytes,
            "built_at": e.built_at, "build_seconds": e.build_seconds, "last_used": e.last_used,
            "pinned": store.pinned(e.key), "dir": e.dir,
        })
    rows.sort(key=lambda r: (-r["last_used"], r["key"]))
    return rows


def _cache_ls(args) -> int:
    return _print_rows(_entries(_store()), args.json, "the cache is empty",
                       ("KEY", "KERNEL", "BACKEND", "KIND", "SIZE", "LAST USED", "PINNED"),
                       lambda r: (r["key"], r["kernel"], r["backend"], r["kind"], _human(r["disk_bytes"]),
                                  _minute(r["last_used"]), "yes" if r["pinned"] else ""))


def _print_rows(rows: list[dict], as_json: bool, empty: str, header: tuple[str, ...], cells) -> int:
    """`rows` as JSON, or `empty` where there are none, or a table: `header`,
    then cells(row) for each row, in columns as wide as their widest cell."""
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print(empty)
        return EXIT_OK
    table = [header] + [cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return EXIT_OK


def _minute(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def _cache_info(args) -> int:
    from registry import knobs
    from registry.builder import ccache

    root = knobs.cache_dir()
    rows = _entries(_store())
    total = sum(r["disk_bytes"] for r in rows)
    pinned = sum(r["pinned"] for r in rows)
    cap = knobs.cache_max_bytes()
    print(f"root      {root}{'' if rows or _layout_exists(root) else '  (not created yet)'}")
    print(f"entries   {len(rows)} ({pinned} pinned by live processes)")
    print(f"size      {_human(total)} of a {_human(cap)} cap (REGISTRY_CACHE_MAX_BYTES)")
    print(f"ccache    {_ccache_line(ccache)}")
    print(f"remote    {_remote_line(ccache)}")
    return EXIT_OK


def _remote_line(ccache) -> str:
    from registry.remote import team_cache

    team = team_cache.current()
    if team is None:
        return "none (set REGISTRY_REMOTE_CACHE=redis://host:port to share builds with a team)"
    problem = team.ping()
    mode = "read-write" if team.writable else "read-only"
    hits, misses = ccache.remote_hit_rate(ccache.stats())
    return (f"{team.display} ({mode}), {'answers' if not problem else problem}; "
            f"ccache remote storage: {hits} hits, {misses} misses")


# ---- remote ----------------------------------------------------------------


def _team():
    import warnings

    from registry.errors import RegistryError
    from registry.remote import team_cache

    team = team_cache.current()
    if team is None:
        raise RegistryError("no remote cache configured: set REGISTRY_REMOTE_CACHE=redis://[user:password@]host:port")
    warnings.simplefilter("ignore", RuntimeWarning)  # a failure is reported as the error below
    return team


def _remote_info(args) -> int:
    from registry.builder import ccache

    print(f"remote    {_remote_line(ccache)}")
    return EXIT_OK


def _remote_ls(args) -> int:
    from registry.errors import RegistryError

    team = _team()
    entries = team.list_kernel(args.name)
    if entries is None:
        raise RegistryError(f"{team.problem or 'the remote cache does not answer'}")
    rows = [{"key": e.key, "kernel": e.kernel, "backend": e.backend, "kind": e.kind, "artifact": e.artifact,
             "artifact_size": e.artifact_size, "built_at": e.built_at, "build_seconds": e.build_seconds}
            for e in entries]
    rows.sort(key=lambda r: (-r["built_at"], r["key"]))
    return _print_rows(rows, args.json, f"the remote cache {team.display} stores nothing for {args.name!r}",
                       ("KEY", "BACKEND", "KIND", "SIZE", "BUILT", "BUILD TIME"),
                       lambda r: (r["key"], r["backend"], r["kind"], _human(r["artifact_size"]),
                                  _minute(r["built_at"]), f"{r['build_seconds']:.1f} s"))


def _ccache_line(ccache) -> str:
    from registry import knobs

    if not knobs.ccache_enabled():
        return "off (REGISTRY_CCACHE=0)"
    if ccache.ccache_executable() is None:
        return "not installed (builds compile every unit; install ccache to reuse unchanged ones)"
    counters = ccache.stats()
    hits, misses = ccache.hit_rate(counters)
    size = counters.get("cache_size_kibibyte", 0) * 1024
    return f"{hits} hits, {misses} misses, {_human(size)} in {counters.get('files_in_cache', 0)} files"


def _cache_gc(args) -> int:
    from registry import knobs

    store = _store()
    cap = args.max_bytes if args.max_bytes is not None else knobs.cache_max_bytes()
    if store is None:
        print("the cache is empty; nothing to remove")
        return EXIT_OK
    _print_report(store.gc(cap), f"cache now {{total}} of a {_human(cap)} cap")
    return EXIT_OK


def _cache_clear(args) -> int:
    if not args.yes:
        args.parser.error("clear removes every cache entry no live process has loaded, "
                          "so the next get of each kernel compiles again; add --yes to confirm")
    store = _store()
    if store is None:
        print("the cache is empty; nothing to remove")
        return EXIT_OK
    _print_report(store.clear(), "cache now {total}")
    return EXIT_OK


def _print_report(report, summary: str) -> None:
    for key in report.removed:
        print(f"removed {key}")
    print(f"removed {len(report.removed)} entries, freed {_human(report.freed_bytes)}; "
          + summary.format(total=_human(report.total_bytes)))
    if report.records_removed:
        print(f"removed {report.records_removed} dependency records that named only removed entries")
    if report.kept_live:
        print(f"kept {report.kept_live} entries that live processes have loaded "
              f"(they go once those processes exit)")


def _human(size: float) -> str:
    if size < 1024:
        return f"{int(size)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.1f} {unit}"
