"""Torch-free kernel libraries built by the registry's own compiler call
(registry/direct_build.py): no libtorch on the link line, keys without torch's
version, one compile-and-link step for a CPU edit, load()-style diagnostics."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

import registry
from registry import _core, direct_build, keys


def _needed(path: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_cpu_library_links_no_torch(axpy_copy, cache_root, compiles):
    op = registry.get(axpy_copy.name, device="cpu")
    x = torch.ones(4)
    assert op(x, x, 2.0)[0].item() == 3.0
    lib = registry.status(axpy_copy.name, device="cpu").artifacts["kernel library"]
    needed = _needed(lib)
    assert not [n for n in needed if "torch" in n or "c10" in n or "python" in n], needed


def test_cpu_library_key_leaves_torch_out(axpy_copy, cache_root):
    registry.get(axpy_copy.name, device="cpu")
    status = registry.status(axpy_copy.name, device="cpu")
    entry = _core.CacheStore(str(cache_root)).lookup(status.key).entry
    names = {i.name for i in entry.inputs}
    assert "env.torch" not in names and "env.python" not in names
    assert "builder" in names and "toolchain.cxx" in names


def test_torch_upgrade_keeps_the_library_key(axpy_copy):
    manifest = _core.parse_manifest(str(axpy_copy.path("kernel.toml")))
    files, _ = keys.kernel_files(manifest, "cpu")
    env = {"env.torch": "2.14.1", "env.python": "3.11 cpython-311", "toolchain.cxx": "g++ 12"}
    before = keys.kernel_lib_key(manifest, "cpu", files, env).hex
    after = keys.kernel_lib_key(manifest, "cpu", files, {**env, "env.torch": "2.15.0"}).hex
    assert before == after
    assert keys.kernel_lib_key(manifest, "cpu", files, {**env, "toolchain.cxx": "g++ 13"}).hex != before


@pytest.mark.parametrize("through_ccache", [False, True])
def test_cpu_edit_is_one_compile_and_link_step(axpy_copy, monkeypatch, through_ccache):
    # Without ccache one step; through ccache, which caches no step that links
    # (so could not share the compile with a team), a compile and a link.
    if through_ccache and shutil.which("ccache") is None:
        pytest.skip("ccache not installed: apt-get install ccache")
    monkeypatch.setenv("REGISTRY_CCACHE", "1" if through_ccache else "0")
    op = registry.get(axpy_copy.name, device="cpu")
    commands = []
    real_run = subprocess.run

    def counting_run(command, *args, **kwargs):
        commands.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(direct_build.subprocess, "run", counting_run)
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha,", "1.0f + axpy_element(alpha,")
    registry.get(axpy_copy.name, device="cpu")
    x = torch.ones(4)
    assert op(x, x, 2.0)[0].item() == 4.0
    compiler_calls = [c for c in commands if "-o" in c]  # (ccache --print-stats runs too)
    if through_ccache:
        assert len(compiler_calls) == 2, compiler_calls
        assert "-c" in compiler_calls[0] and "-shared" in compiler_calls[1]
    else:
        assert len(compiler_calls) == 1, compiler_calls
        assert "-shared" in compiler_calls[0] and "-c" not in compiler_calls[0]


def test_compile_error_reads_file_line_with_the_line_marked(axpy_copy):
    from registry.errors import BuildError
    from registry.render import render_text

    axpy_copy.edit("axpy_cpu.cpp", "T* os = static_cast<T*>(out.data);", "T* os = static_cast<T*>(out.data)")
    with pytest.raises(BuildError) as caught:
        registry.get(axpy_copy.name, device="cpu")
    first = caught.value.first
    assert first is not None and first.file.endswith("axpy_cpu.cpp"), caught.value.log
    text = render_text(caught.value)
    assert f"axpy_cpu.cpp:{first.line}" in text and " > " in text


def test_several_sources_compile_apart_then_link(axpy_copy):
    axpy_copy.path("extra.cpp").write_text("int kreg_test_extra() { return 1; }\n")
    axpy_copy.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["axpy_cpu.cpp", "extra.cpp"]')
    op = registry.get(axpy_copy.name, device="cpu")
    x = torch.ones(4)
    assert op(x, x, 2.0)[0].item() == 3.0
