"""IPython magics for the registry.

    %load_ext registry.magics

    %registry list               kernels the registry finds
    %registry status NAME        what the last get of NAME did
    %registry rebuild NAME       compile NAME again and rebind it
    %registry ccache             ccache hits and misses
    %registry tune NAME [--shapes 4096x256,65536x1024] [--dtypes float32] [--device cuda] [--force]
                                 registry.tune: search NAME's config space, keep the winners

    %%kernel NAME --signature "NAME(Tensor x, float alpha) -> Tensor" [--cpu|--cuda] [--dtypes float32,float16]
             [--outputs '{ y = "like x", mean = "float32[x.shape[:-1]]" }']
    <C++ or CUDA source with one launcher per dtype, see registry/include/kreg/abi.h:
     KREG_API const char* NAME_f32(kreg_tensor out, kreg_tensor x, float alpha, void* stream) {...}>

The cell's source is written to <cache dir>/v1/inline/NAME/; its manifest is
composed and held in memory by the core (no kernel.toml), so every later get
of NAME in this process finds it before any kernel folder, and none outlives
the notebook. Built with registry.get and bound to NAME in the notebook. The
source is written only when its text changes: re-running an unchanged cell is
a cache hit, an edited one (its code or its line) rebuilds and the same op
handle runs the new code.

Loading the extension also shows the registry's errors that escape a cell
without a traceback (registry.notebook.render): a BuildError as the compiler's errors
next to the offending source lines, any other (unknown kernel, manifest or
signature error, missing launcher, wrong argument type) as its message and
the cell line that raised. %tb shows the traceback.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from registry.dtypes import SUFFIXES as DTYPE_SUFFIXES
from registry.errors import BuildError, MagicUsageError
from registry.state import duration_text


def inline_root() -> Path:
    from registry import knobs

    return knobs.cache_path("inline")


def _write_if_changed(path: Path, text: str) -> bool:
    from registry import _core

    if path.is_file() and path.read_bytes() == text.encode():  # bytes: a damaged file is rewritten
        return False  # an untouched mtime keeps the stamps, and get, on its fast path
    path.parent.mkdir(parents=True, exist_ok=True)
    _core.write_file_atomic(str(path), text)
    return True


def parse_outputs(text: str | None) -> dict[str, str] | None:
    """--outputs as a manifest writes it: `{ y = "like x", mean = "float32[x.shape[:-1]]" }`
    (the braces may be left out). Read as TOML, then written back escaped."""
    if not text:
        return None
    import tomllib

    inner = text.strip().strip("'")
    inner = inner[1:-1] if inner.startswith("{") and inner.endswith("}") else inner
    try:
        outputs = tomllib.loads(f"outputs = {{ {inner} }}")["outputs"]
    except tomllib.TOMLDecodeError as error:
        outputs, reason = None, str(error)
    else:
        reason = "each value must be a string"
    if not outputs or not all(isinstance(v, str) for v in outputs.values()):
        raise MagicUsageError(
            f"%%kernel: --outputs takes the manifest's table of outputs, one per return, e.g. "
            f"--outputs '{{ values = \"x.dtype[x.shape[:-1]]\", indices = \"int64[x.shape[:-1]]\" }}' "
            f"(registry/core/output_spec.h); {text!r} is not one: {reason}")
    return outputs


def _source_name(name: str, backend: str) -> str:
    return f"{name}.cu" if backend == "cuda" else f"{name}.cpp"


def define_inline_kernel(name: str, body: str, backend: str, signature: str, dtypes: list[str],
                         outputs: dict[str, str] | None = None) -> Path:
    """Writes a %%kernel cell's source (compilers read files, diagnostics name
    its lines) and hands its manifest to the core, which composes and parses
    it in memory and holds it for every later get of `name`
    (core/inline_manifest.h, core/inline_kernels.h); returns the source's folder."""
    from registry import _core
    from registry.state import STATE

    if not _core.is_valid_kernel_name(name):
        raise MagicUsageError(f"{name!r} is not a valid kernel name: use lowercase letters, digits and _ "
                              f"(starting with a letter or _), at most 64 characters, e.g. %%kernel my_scale")
    folder = inline_root() / name
    source = _source_name(name, backend)
    # The other backend's source (a cell switched between --cpu and --cuda),
    # and a kernel.toml an earlier version of the registry wrote here.
    for stale in (folder / _source_name(name, "cpu" if backend == "cuda" else "cuda"), folder / "kernel.toml"):
        stale.unlink(missing_ok=True)
    _write_if_changed(folder / source, body if body.endswith("\n") else body + "\n")
    manifest = _core.inline_manifest(name, backend, source, signature, list(dtypes),
                                     list((outputs or {}).items()), str(folder))
    if _core.define_inline_kernel(manifest):
        STATE.redefined(name)  # no file moved: the hot path would serve the op as it was
    return folder


def show_registry_error(shell, etype, value, tb, tb_offset=None):
    """IPython custom exception handler for the registry's errors: a
    BuildError as the compiler's errors beside the offending source lines,
    any other (unknown kernel, manifest or signature error, missing launcher,
    wrong argument type) as its message and the cell line that raised; no
    traceback, in HTML in a notebook and as text in a terminal. %tb and %debug
    still reach the traceback."""
    import sys

    from IPython.display import display

    # What IPython records for a traceback it shows itself: %tb and %debug read it.
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    # Rendering must never hide the error itself (and a handler that raises
    # is unregistered by IPython): each step falls back to less.
    try:
        from registry.notebook import render

        where = render.user_line(tb)
        text, html = render.render_error_text(value, where), render.render_error_html(value, where)
    except Exception:  # noqa: BLE001
        text, html = f"{etype.__name__}: {value}", None
    bundle = {"text/plain": text}
    if html:
        bundle["text/html"] = html
    display(bundle, raw=True)
    return []


@magics_class
class RegistryMagics(Magics):
    @line_magic("registry")
    def registry_magic(self, line: str):
        """%registry list | status NAME | rebuild NAME | ccache | isolate on|off | tune NAME [options]"""
        import registry

        words = shlex.split(line)
        command, rest = (words[0], words[1:]) if words else ("", [])
        if command == "list" and not rest:
            for info in registry.list():
                print(info)
        elif command == "status" and len(rest) == 1:
            device = _loaded_device(rest[0])
            print(registry.status(rest[0], device=device) if device != "" else _not_loaded(rest[0]))
        elif command == "rebuild" and len(rest) == 1:
            device = _loaded_device(rest[0]) or None
            registry.get(rest[0], rebuild=True, device=device)  # the handles you hold run the new build
            print(registry.status(rest[0], device=device))
        elif command == "ccache" and not rest:
            print(self._ccache_report())
        elif command == "isolate" and rest in (["on"], ["off"]):
            # The knob every later get reads (registry/knobs.py): ops got from now on run
            # their launchers in a worker process; handles got before keep their mode.
            from registry import knobs

            knobs.set_isolate(rest == ["on"])
            print(f"isolation {rest[0]}: registry.get() now returns "
                  + ("isolated ops (a crash or hang raises registry.KernelFault)" if rest == ["on"] else "normal ops"))
        elif command == "tune" and rest and not rest[0].startswith("-"):
            return registry.tune(rest[0], **_tune_options(rest[1:]))  # the cell shows its table
        else:
            print("usage: %registry list | status NAME | rebuild NAME | ccache | isolate on|off | "
                  "tune NAME [--shapes 4096x256,...] [--dtypes float32,...] [--device cpu|cuda] [--force]")

    @staticmethod
    def _ccache_report() -> str:
        from registry.builder import ccache

        if ccache.ccache_executable() is None:
            return "ccache is off: not found on PATH, or REGISTRY_CCACHE=0. Install ccache to reuse unchanged units."
        hits, misses = ccache.hit_rate(ccache.stats())
        total = hits + misses
        rate = f"{100 * hits / total:.0f} % hits" if total else "no compiles recorded yet"
        return f"ccache: {hits} hits, {misses} misses ({rate})"

    @magic_arguments()
    @argument("name", help="kernel name, and the notebook variable the op is bound to")
    @argument("--signature", "-s", help='the op, e.g. "scale(Tensor x, float alpha) -> Tensor"')
    @argument("--outputs", "-o", help="each return's dtype and shape, as in kernel.toml: "
                                      "'{ values = \"like x\", indices = \"int64[x.shape[:-1]]\" }'")
    @argument("--dtypes", "-d", default="float32", help="comma-separated: float32,float16,bfloat16,float64")
    @argument("--cuda", action="store_true", help="the cell is CUDA (default: REGISTRY_DEVICE, else CUDA when a GPU is available)")
    @argument("--cpu", action="store_true", help="the cell is C++ for the CPU")
    @cell_magic("kernel")
    def kernel_magic(self, line: str, cell: str):
        """Build the cell as kernel NAME and bind its op to NAME (see the module doc)."""
        import registry
        from registry import environment, knobs

        args = parse_argstring(self.kernel_magic, line)
        if args.cuda and args.cpu:
            raise MagicUsageError("%%kernel: pass --cuda or --cpu, not both")
        backend = "cuda" if args.cuda else "cpu" if args.cpu else environment.backend_for(None)
        dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
        unknown = [d for d in dtypes if d not in DTYPE_SUFFIXES]
        if unknown:
            raise MagicUsageError(f"%%kernel: unknown dtype {', '.join(unknown)}; use {', '.join(DTYPE_SUFFIXES)}")
        if not args.signature:
            example = " ".join(f"{args.name}_{DTYPE_SUFFIXES[d]}" for d in dtypes)
            raise MagicUsageError(
                f'%%kernel {args.name}: pass --signature "{args.name}(Tensor x, float alpha) -> Tensor" (your op\'s '
                f"arguments); the cell must define the launchers {example} (see registry/include/kreg/abi.h)")
        signature = args.signature.strip("'\"")
        folder = define_inline_kernel(args.name, cell, backend, signature, dtypes, parse_outputs(args.outputs))
        # The manifest has one backend section, so get() without a device finds
        # it, and %registry status NAME / registry.status(NAME) see this load.
        device = backend if knobs.device() not in (None, backend) else None
        try:
            op = registry.get(args.name, device=device)
        except BuildError as error:  # told in the cell's lines, not the cache copy's
            from registry.notebook import render

            raise render.in_cell(error, folder / _source_name(args.name, backend), args.name) from None
        self.shell.user_ns[args.name] = op
        status = registry.status(args.name, device=device)
        how = {"in-process": "unchanged, already loaded", "cache": "loaded from the cache"}.get(
            status.outcome, f"compiled in {duration_text(status.build_seconds)}")
        print(f"{args.name}: {op.signature if hasattr(op, 'signature') else op} [{backend}], {how}")


def _tune_options(words: list[str]) -> dict:
    """--shapes 4096x256,65536x1024 --dtypes float32 --device cuda --force, as registry.tune's arguments."""
    options, i = {}, 0
    while i < len(words):
        flag = words[i]
        if flag == "--force":
            options["force"] = True
            i += 1
            continue
        if flag not in ("--shapes", "--dtypes", "--device") or i + 1 == len(words):
            raise MagicUsageError(f"%registry tune: unknown option {flag!r} or missing value; options: "
                                  f"--shapes 4096x256,65536x1024 --dtypes float32,bfloat16 --device cpu|cuda --force")
        value = words[i + 1]
        if flag == "--shapes":
            try:
                options["shapes"] = [tuple(int(d) for d in s.split("x")) for s in value.split(",")]
            except ValueError:
                raise MagicUsageError(f"%registry tune: --shapes takes ROWSxCOLS,... (e.g. 4096x256), not {value!r}") from None
        elif flag == "--dtypes":
            options["dtypes"] = value.split(",")
        else:
            options["device"] = value
        i += 2
    return options


def _loaded_device(name: str) -> str | None:
    """The device argument under which `name` was loaded here: None for the
    default, "cpu"/"cuda" when asked explicitly, "" when not loaded at all."""
    import registry

    for device in (None, "cpu", "cuda"):
        try:
            registry.status(name, device=device)
            return device
        except LookupError:
            continue
    return ""


def _not_loaded(name: str) -> str:
    """Why there is no status: the kernel does not exist (with the closest
    name), or it exists and this process has not loaded it."""
    from registry.errors import KernelNotFoundError
    from registry.resolve import find

    try:
        find(name)
    except KernelNotFoundError as error:
        return str(error)
    return f"kernel {name!r} is not loaded in this kernel yet; run registry.get({name!r}) or its %%kernel cell"


_saved: dict = {}


def load_ipython_extension(ipython) -> None:
    from registry.errors import RegistryError

    ipython.register_magics(RegistryMagics)
    if "custom" not in _saved:
        _saved["custom"] = (ipython.custom_exceptions, ipython.CustomTB)
    ipython.set_custom_exc((RegistryError,), show_registry_error)


def unload_ipython_extension(ipython) -> None:
    magics = ipython.magics_manager.magics
    magics["line"].pop("registry", None)
    magics["cell"].pop("kernel", None)
    if "custom" in _saved:
        exceptions, handler = _saved.pop("custom")
        ipython.custom_exceptions, ipython.CustomTB = exceptions, handler
