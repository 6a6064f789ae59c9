"""A failed build rendered for people: file:line, the marked source line, the log."""
from __future__ import annotations

import pytest

import registry
from registry.errors import BuildError, Diagnostic
from registry.notebook.render import readable_log, render_html, render_text, resolve_source


@pytest.fixture
def compile_error(axpy_copy) -> tuple[BuildError, str]:
    # Line 13 of axpy_math.h, two includes below the source that is compiled.
    axpy_copy.edit("axpy_math.h", "+ AXPY_BIAS;", "+ AXPY_BIAS + undefined_thing;")
    with pytest.raises(BuildError) as info:
        registry.get(axpy_copy.name, device="cpu")
    return info.value, str(axpy_copy.path("axpy_math.h"))


def test_text_names_file_line_and_marks_the_source(compile_error):
    err, header = compile_error
    text = render_text(err)
    lines = text.splitlines()
    assert any(line.startswith(f"{header}:13:") and "error:" in line and "undefined_thing" in line for line in lines)
    marked = next(line for line in lines if line.lstrip().startswith("> 13 |"))
    assert "undefined_thing" in marked
    caret = lines[lines.index(marked) + 1]
    # The caret sits under the column the compiler reported.
    assert caret.index("^") - caret.index("|") == marked.index("undefined_thing") - marked.index("|")
    assert any(line.lstrip().startswith("12 |") for line in lines)  # context before
    assert "compiler log" in text and "b'" not in text and "\\n" not in text


def test_html_marks_the_line_and_collapses_the_log(compile_error):
    err, header = compile_error
    page = render_html(err)
    assert f"{header}:13:" in page
    assert "<details>" in page and "compiler log" in page
    assert "class='hit'" in page and "<span class='col'>undefined_thing</span>" in page
    assert "<script" not in page


def test_html_escapes_source_text(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("int a;\nstd::vector<int> v = <oops>;\nint b;\n")
    err = BuildError("k", "the kernel library", [Diagnostic(str(source), 2, 22, "error", "expected '<' here")], "log <x>")
    page = render_html(err)
    assert "oops&gt;" in page and "<oops>" not in page and "&lt;int&gt;" in page
    assert "log &lt;x&gt;" in page


def test_log_is_readable_text():
    assert readable_log(b"a\nb") == "a\nb"
    assert readable_log("b'line one\\nline two'") == "line one\nline two"
    assert readable_log("\x1b[01;31merror:\x1b[m boom") == "error: boom"


def test_text_keeps_only_the_tail_of_a_long_log(tmp_path):
    log = "\n".join(f"line {i}" for i in range(100))
    text = render_text(BuildError("k", "the kernel library", [], log))
    assert "line 99" in text and "line 10\n" not in text and "last 20 of 100 lines" in text


def test_relative_paths_from_the_staging_folder_resolve(cache_root):
    # ccache (CCACHE_BASEDIR = cache root) reports files under the cache
    # relative to the build's staging folder <cache>/v1/tmp/<id>/.
    source = cache_root / "v1" / "inline" / "render_probe" / "render_probe.cpp"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("int x = y;\n")
    relative = "../../inline/render_probe/render_probe.cpp"
    assert resolve_source(relative) == str(source)
    text = render_text(BuildError("k", "the kernel library", [Diagnostic(relative, 1, 9, "error", "'y' was not declared")], ""))
    assert f"{source}:1:9: error" in text and "> 1 | int x = y;" in text


def test_a_missing_file_still_renders_the_diagnostic():
    err = BuildError("k", "the kernel library", [Diagnostic("/nonexistent/x.cu", 4, None, "error", "boom")], "boom")
    assert "/nonexistent/x.cu:4: error: boom" in render_text(err)
    assert "/nonexistent/x.cu:4: error: boom" in render_html(err)


def test_other_registry_errors_render_as_message_and_the_users_line():
    from registry.errors import KernelNotFoundError
    from registry.notebook.render import render_error_html, render_error_text

    err = KernelNotFoundError("<apxy>", ["axpy"], "axpy")
    where = "cell line 2: registry.get('<apxy>')"
    text = render_error_text(err, where)
    assert text.splitlines()[0].startswith("KernelNotFoundError: no kernel named '<apxy>'")
    assert text.splitlines()[-1] == f"  at {where}"
    page = render_error_html(err, where)
    assert "KernelNotFoundError" in page and "&lt;apxy&gt;" in page and "<apxy>" not in page


def test_a_magic_is_shown_as_written_not_as_ipythons_call():
    from registry.notebook.render import _as_written

    call = "get_ipython().run_cell_magic('kernel', 'k --cpu --signature \"k(Tensor x) -> Tensor\"', '\\n#include x\\n')"
    assert _as_written(call) == '%%kernel k --cpu --signature "k(Tensor x) -> Tensor"'
    assert _as_written("get_ipython().run_line_magic('registry', 'status k')") == "%registry status k"
    assert _as_written("registry.get('k')") == "registry.get('k')"
