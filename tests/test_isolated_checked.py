"""Checked builds on the CPU (ASan + UBSan in the worker): an access just past
a tensor's end is named by kind, argument and file:line of the kernel's own
source, and shown in a notebook cell like a compile error; a clean checked
call returns the right result; %registry isolate on|off sets the knob."""
from __future__ import annotations

import itertools
import os
import time

import pytest
import torch

import registry
from isolation_kernels import CHECKED_BODIES, CPU_FAULTS, good, write_cpu_kernel
from registry.notebook import render

_names = itertools.count()


def _edit(kernels_root, name, body):
    source = write_cpu_kernel(kernels_root, name, body)
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    return source


@pytest.mark.parametrize("what", sorted(CHECKED_BODIES))
def test_checked_call_names_the_faulting_line(kernels_root, cache_root, what):
    name = f"iso_checked_{next(_names)}"
    body, line = CHECKED_BODIES[what]
    source = _edit(kernels_root, name, body)
    x = torch.arange(16, dtype=torch.float32)
    # Without the check a write just past the end is named by its argument
    # (guards), a read within the page goes unnoticed, as in the normal op ...
    plain = registry.get(name, device="cpu", isolate=True)
    if what == "out-of-bounds write":
        with pytest.raises(registry.KernelFault, match="wrote past the end of `out` \\(n = 16\\)"):
            plain(x, 2.0)
    else:
        plain(x, 2.0)
    # ... with it, the line is named.
    op = registry.get(name, device="cpu", checked=True)
    start = time.perf_counter()
    with pytest.raises(registry.KernelFault) as caught:
        op(x, 2.0)
    assert time.perf_counter() - start <= 2.0
    fault = caught.value
    assert fault.checked and fault.diagnostics, str(fault)
    assert (fault.diagnostics[0].file, fault.diagnostics[0].line) == (str(source), line), str(fault)
    direction = what.split()[-1]  # "write" / "read"
    assert f"out-of-bounds {direction}" in fault.access, fault.access
    argument = "'out'" if direction == "write" else "'x'"
    assert f"0 bytes after the end of argument {argument}" in fault.relative, fault.relative
    assert f"{source}:{line}" in str(fault)
    text = render.render_error_text(fault)
    assert f" > {line} | {body}" in text, text  # the marked source line, as a compile error shows it
    html = render.render_error_html(fault)
    assert "class='hit'" in html and "sanitizer report" in html
    # The next, clean edit runs checked and gives the right result.
    _edit(kernels_root, name, good(4))
    assert torch.equal(registry.get(name, device="cpu", checked=True)(x, 2.0), 2.0 * x + 4)


def test_checked_build_is_keyed_apart_and_the_normal_op_is_unchanged(kernels_root, cache_root):
    name = f"iso_checked_{next(_names)}"
    _edit(kernels_root, name, good(1))
    x = torch.randn(100)
    normal = registry.get(name, device="cpu")
    checked = registry.get(name, device="cpu", checked=True)
    assert torch.equal(checked(x, 3.0), normal(x, 3.0))
    assert "checked" in repr(checked) and "isolated" not in repr(normal)
    from registry.isolation import checked as variants

    built = variants.variant(name, "cpu", normal.key)
    assert built.library != registry.status(name, device="cpu").artifacts["kernel library"]


def test_a_checked_build_is_derived_in_memory_and_cached_as_any_build(kernels_root, cache_root):
    """No copy of the kernel's folder: the checked build compiles the user's
    files where they are, through the normal resolve, so a second process (here:
    the variant forgotten) finds it in the cache with no compile."""
    from registry.isolation import checked as variants
    from registry.resolve import find, resolve

    name = f"iso_checked_{next(_names)}"
    _edit(kernels_root, name, good(2))
    x = torch.randn(100)
    assert torch.equal(registry.get(name, device="cpu", checked=True)(x, 1.0), x + 2)
    assert not any(path.name.endswith("__checked") for path in cache_root.rglob("*")), \
        "a checked build copies no kernel folder"
    again = resolve(name, "cpu", False, lambda *_: None, variants.derive(find(name), "cpu"), load_ops=False)
    assert again.status.outcome == "cache" and again.status.compiled == [], again.status
    assert again.ops == {}
    assert again.status.key != registry.status(name, device="cpu").key  # keyed apart from the normal build


def test_isolate_magic_sets_the_knob(kernels_root, cache_root, monkeypatch):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("REGISTRY_ISOLATE", "0")
    name = f"iso_magic_{next(_names)}"
    _edit(kernels_root, name, CPU_FAULTS["null pointer"])
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "registry.magics")
    try:
        shell.run_line_magic("registry", "isolate on")
        assert os.environ["REGISTRY_ISOLATE"] == "1"
        result = shell.run_cell(f"import registry, torch\nregistry.get({name!r}, device='cpu')(torch.ones(2), 1.0)")
        assert isinstance(result.error_in_exec, registry.KernelFault)
        shell.run_line_magic("registry", "isolate off")
        assert os.environ["REGISTRY_ISOLATE"] == "0"
        assert "isolated" not in repr(registry.get(name, device="cpu"))
    finally:
        shell.run_line_magic("unload_ext", "registry.magics")
