"""A failed build, rendered for people: where, the offending lines, then the log.

    render_text(err)   for terminals and logs
    render_html(err)   for notebooks (the magics extension shows it when a
                       BuildError escapes a cell)
    render_error_text(err, where) / render_error_html(err, where)
                       any registry error: a BuildError as above (and a checked
                       call's KernelFault with its faulting line), others (an
                       unknown kernel, a manifest or signature error, a missing
                       launcher, a wrong argument) as their message and the
                       user's line that raised, with no traceback

Each diagnostic becomes `file:line:col: error: message`, followed by the
lines around it from the file as it is now, with the line marked and a caret
under the column. The compiler's whole log follows: collapsed in a <details>
block in HTML, its last lines in text.
"""
from __future__ import annotations

import ast
import dataclasses
import html
import os
import re
from pathlib import Path

CONTEXT_LINES = 1     # source lines shown before and after the offending one
TEXT_LOG_LINES = 20   # how much of the log the text rendering keeps
MAX_DIAGNOSTICS = 10  # the first errors matter; later ones are usually fallout

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def readable_log(log) -> str:
    """The compiler log as plain text: bytes decoded, a `b'...'` repr undone,
    color escapes stripped (ccache/ninja may force colors on)."""
    if isinstance(log, bytes):
        log = log.decode("utf-8", errors="replace")
    log = str(log or "")
    stripped = log.strip()
    if stripped[:2] in ("b'", 'b"') and stripped[-1:] in ("'", '"'):
        try:
            log = ast.literal_eval(stripped).decode("utf-8", errors="replace")
        except (ValueError, SyntaxError):
            pass
    return _ANSI.sub("", log)


def resolve_source(file: str, log: str = "") -> str:
    """An existing path for a diagnostic's file, or `file` unchanged.

    A relative path is relative to the build's staging folder, which is gone
    by now: ccache (CCACHE_BASEDIR = the cache root) rewrites paths under the
    cache, e.g. an inline kernel's, relative to it. Staging folders sit at
    <cache>/v1/tmp/<one level>, so resolve from there; failing that, from the
    working directory, or an absolute path in the log that ends the same way.
    """
    if os.path.isabs(file):
        return file
    candidates = []
    try:
        from registry import knobs

        candidates.append(os.path.normpath(knobs.cache_path("tmp") / "staging" / file))
    except ImportError:  # rendering outside the package
        pass
    candidates.append(os.path.abspath(file))
    tail = "/" + re.sub(r"^(\.\.?/)+", "", file)
    candidates += [token for token in re.findall(r"(/[^\s'\"]+)", log) if token.endswith(tail)]
    return next((c for c in candidates if os.path.isfile(c)), file)


def source_excerpt(file: str, line: int, context: int = CONTEXT_LINES) -> list[tuple[int, str]]:
    """[(line number, text)] around `line`, or [] when the file cannot be read
    (a temporary file, or one that moved since the build)."""
    path = Path(file)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    first, last = max(1, line - context), min(len(lines), line + context)
    return [(n, lines[n - 1].expandtabs(4)) for n in range(first, last + 1)]


def _caret_offset(text: str, column: int | None) -> int | None:
    # The compiler counts columns in the line as written (tabs are one column);
    # the excerpt expanded tabs, so measure the expanded prefix.
    if not column:
        return None
    return len(text[: column - 1].expandtabs(4)) if column - 1 <= len(text) else None


def _resolved(err) -> list:
    """The error's diagnostics with their files made findable (see resolve_source)."""
    log = readable_log(getattr(err, "log", ""))
    return [_with_file(d, resolve_source(d.file, log)) for d in getattr(err, "diagnostics", []) or []]


def _with_file(diagnostic, file: str):
    if hasattr(diagnostic, "_replace"):  # a NamedTuple
        return diagnostic._replace(file=file)
    if dataclasses.is_dataclass(diagnostic):
        return dataclasses.replace(diagnostic, file=file)
    return diagnostic


class CellSource:
    """A %%kernel cell a build compiled from its cache copy: diagnostics in
    that file are shown as the cell's lines (the %%kernel line is line 1)."""

    def __init__(self, path, name: str, offset: int = 1):
        self.path, self.name, self.offset = os.path.realpath(path), name, offset

    def holds(self, file: str) -> bool:
        return os.path.realpath(file) == self.path


def in_cell(err, path, name: str):
    """`err` (a BuildError of a %%kernel cell's kernel) told in the cell's
    lines, its message included; returns err."""
    cell = err.cell = CellSource(path, name)
    log = readable_log(getattr(err, "log", ""))
    message = str(err)
    for d in getattr(err, "diagnostics", None) or []:
        if cell.holds(resolve_source(d.file, log)):
            message = message.replace(str(d), _location(d, cell))
    err.args = (message,)
    return err


def _cell(err, d):
    cell = getattr(err, "cell", None)
    return cell if cell is not None and cell.holds(d.file) else None


def _location(d, cell=None) -> str:
    """`file:line:col: error: message`, or for a cell `cell 'name', line N, column C: error: message`."""
    if cell is None:
        return str(d)
    column = f", column {d.column}" if d.column else ""
    return f"cell {cell.name!r}, line {d.line + cell.offset}{column}: {d.severity}: {d.message}"


def _header(err) -> str:
    return f"building {getattr(err, 'what', 'a kernel')} of kernel {getattr(err, 'kernel', '?')!r} failed"


def render_text(err) -> str:
    """The error as plain text: diagnostics with marked source, then the log's tail."""
    out = [_header(err)]
    diagnostics = _resolved(err)
    for d in diagnostics[:MAX_DIAGNOSTICS]:
        cell = _cell(err, d)
        out += ["", _location(d, cell), *_excerpt_text(d, cell.offset if cell else 0)]
    if len(diagnostics) > MAX_DIAGNOSTICS:
        out.append(f"\n... and {len(diagnostics) - MAX_DIAGNOSTICS} more errors (see the log)")
    log_lines = readable_log(getattr(err, "log", "")).rstrip().splitlines()
    shown = log_lines[-TEXT_LOG_LINES:]
    skipped = len(log_lines) - len(shown)
    label = f"last {len(shown)} of {len(log_lines)} lines" if skipped else "complete"
    out += ["", f"compiler log ({label}):"]
    out += [f"  {line}" for line in shown]
    out += ["", "Fix the source and call registry.get() again; the op you had keeps working."]
    return "\n".join(out)


_STYLE = (
    "<style>"
    ".kreg-err{font-family:monospace;font-size:13px}"
    ".kreg-err .where{color:#b00;font-weight:bold;margin-top:.6em}"
    ".kreg-err pre{margin:.2em 0;padding:.3em;background:rgba(127,127,127,.08)}"
    ".kreg-err .hit{background:rgba(255,0,0,.15)}"
    ".kreg-err .col{text-decoration:underline wavy red}"
    "</style>"
)


def _html_line(number: int, text: str, width: int, hit: bool, column: int | None) -> str:
    prefix = f"{'&gt;' if hit else ' '} {number:>{width}} | "
    if hit and column and column - 1 < len(text):
        # Underline the token the compiler points at: an identifier or number, else one character.
        start = column - 1
        token = re.match(r"\w+|\S", text[start:])
        end = start + (len(token.group()) if token else 1)
        body = html.escape(text[:start]) + f"<span class='col'>{html.escape(text[start:end])}</span>" + html.escape(text[end:])
    else:
        body = html.escape(text)
    return f"<span class='hit'>{prefix}{body}</span>" if hit else prefix + body


def render_html(err) -> str:
    """The error as an HTML fragment (for a notebook's output area)."""
    parts = [_STYLE, "<div class='kreg-err'>", f"<div><b>{html.escape(_header(err))}</b></div>"]
    diagnostics = _resolved(err)
    for d in diagnostics[:MAX_DIAGNOSTICS]:
        cell = _cell(err, d)
        parts.append(f"<div class='where'>{html.escape(_location(d, cell))}</div>")
        parts.append(_excerpt_html(d, cell.offset if cell else 0))
    if len(diagnostics) > MAX_DIAGNOSTICS:
        parts.append(f"<div>... and {len(diagnostics) - MAX_DIAGNOSTICS} more errors (see the log)</div>")
    log = readable_log(getattr(err, "log", "")).rstrip()
    parts.append(
        f"<details><summary>compiler log ({len(log.splitlines())} lines)</summary>"
        f"<pre>{html.escape(log)}</pre></details>"
    )
    parts.append("<div>Fix the source and call <code>registry.get()</code> again; the op you had keeps working.</div>")
    parts.append("</div>")
    return "".join(parts)


# ---- any registry error ------------------------------------------------------

_CELL_FILE = re.compile(r"^<ipython-input-|/ipykernel_\d+/")


def user_line(tb) -> str | None:
    """Where the user's code raised: the innermost frame outside this package
    and outside installed libraries (torch, IPython, the standard library),
    as "cell line 2: registry.get('x')" or "path.py:12: ...". None when the
    traceback has no such frame."""
    import sysconfig
    import traceback

    skip = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # the registry package
    skip |= {os.path.abspath(p) for k, p in sysconfig.get_paths().items() if k in ("stdlib", "purelib", "platlib")}
    user = [f for f in traceback.extract_tb(tb)
            if not any(os.path.abspath(f.filename).startswith(d + os.sep) for d in skip)]
    if not user:
        return None
    frame = user[-1]
    where = f"cell line {frame.lineno}" if _CELL_FILE.search(frame.filename) else f"{frame.filename}:{frame.lineno}"
    return f"{where}: {_as_written(frame.line.strip())}" if frame.line else where


def _as_written(line: str) -> str:
    """A magic as the user wrote it: IPython runs `%%kernel NAME ...` as
    get_ipython().run_cell_magic('kernel', 'NAME ...', '<the whole cell>')."""
    call = _MAGIC_CALL.match(line)
    if call is None:
        return line
    try:
        name, args = ast.literal_eval(call["name"]), ast.literal_eval(call["args"])
    except (ValueError, SyntaxError):
        return line
    return f"{'%%' if call['kind'] == 'cell' else '%'}{name} {args}".rstrip()


_STRING = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'  # a Python string literal
_MAGIC_CALL = re.compile(rf"^get_ipython\(\)\.run_(?P<kind>cell|line)_magic\((?P<name>{_STRING}), (?P<args>{_STRING})")


def _excerpt_text(d, shift: int = 0) -> list[str]:
    """The lines around d's, numbered from `shift` + 1 (a cell's lines follow its %%kernel line)."""
    out = []
    excerpt = source_excerpt(d.file, d.line)
    width = len(str(excerpt[-1][0] + shift)) if excerpt else 0
    for number, text in excerpt:
        marker = ">" if number == d.line else " "
        out.append(f" {marker} {number + shift:>{width}} | {text}")
        offset = _caret_offset(text, d.column) if number == d.line else None
        if offset is not None:
            out.append(f"   {' ' * width} | {' ' * offset}^")
    return out


def _excerpt_html(d, shift: int = 0) -> str:
    excerpt = source_excerpt(d.file, d.line)
    if not excerpt:
        return ""
    width = len(str(excerpt[-1][0] + shift))
    return "<pre>" + "\n".join(_html_line(n + shift, t, width, n == d.line, d.column) for n, t in excerpt) + "</pre>"


def render_error_text(err, where: str | None = None) -> str:
    from registry.errors import BuildError

    if isinstance(err, BuildError):
        return render_text(err)
    out = [f"{type(err).__name__}: {err}"]
    # A checked call's fault (registry.KernelFault) names the faulting line:
    # shown like a compiler error, with the marked source line.
    for d in (getattr(err, "diagnostics", None) or [])[:MAX_DIAGNOSTICS]:
        out += ["", str(d)] + _excerpt_text(d)
    if where:
        out.append(f"  at {where}")
    return "\n".join(out)


def render_error_html(err, where: str | None = None) -> str:
    from registry.errors import BuildError

    if isinstance(err, BuildError):
        return render_html(err)
    parts = [_STYLE, "<div class='kreg-err'>",
             f"<div class='where'>{html.escape(type(err).__name__)}</div>",
             f"<pre style='white-space:pre-wrap'>{html.escape(str(err))}</pre>"]
    for d in (getattr(err, "diagnostics", None) or [])[:MAX_DIAGNOSTICS]:  # a checked call's fault
        parts += [f"<div class='where'>{html.escape(str(d))}</div>", _excerpt_html(d)]
    log = readable_log(getattr(err, "log", "") or "").rstrip() if getattr(err, "checked", False) else ""
    if log:
        parts.append(f"<details><summary>sanitizer report ({len(log.splitlines())} lines)</summary>"
                     f"<pre>{html.escape(log)}</pre></details>")
    if where:
        parts.append(f"<div>at <code>{html.escape(where)}</code></div>")
    parts.append("</div>")
    return "".join(parts)
