"""Every command line a build runs is composed in registry/command_lines.py,
and every key covers that file by its digest: a flag changed there changes
the keys (with no recipe string bumped by hand), and the next `get` builds
with it; changed back, the earlier build comes from the cache."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
import torch

import registry
from isolation_kernels import write_cpu_kernel
from registry import command_lines, environment, knobs
from registry.builder import keys
from registry.builder.step import builds_run
from registry.resolve import find
from reliability_helpers import binding_seed, private_cache  # noqa: F401 (fixtures)

PROBE_FLAG = '"-fvisibility=hidden"]'  # the composed flag the tests edit (HIDDEN_CFLAGS)


@pytest.fixture
def edited_command_lines(tmp_path):
    """command_lines.py as if a define were added to every kernel library's
    flags: the file environment.py digests is an edited copy, and the function
    the recipe calls adds the define."""
    text = Path(command_lines.__file__).read_text()
    assert PROBE_FLAG in text
    edited = tmp_path / "command_lines.py"
    edited.write_text(text.replace(PROBE_FLAG, '"-fvisibility=hidden", "-DCOMMAND_LINES_PROBE=7"]', 1))
    composed = command_lines.kernel_lib_cflags
    monkeypatch = pytest.MonkeyPatch()  # its own: revert() undoes only the edit

    def edit():
        monkeypatch.setattr(environment, "COMMAND_LINES", edited)
        monkeypatch.setattr(command_lines, "kernel_lib_cflags",
                            lambda header, flags: [*composed(header, flags), "-DCOMMAND_LINES_PROBE=7"])
        environment.command_lines_digest.cache_clear()

    def revert():
        monkeypatch.undo()
        environment.command_lines_digest.cache_clear()

    yield edit, revert
    revert()


def _kernel_lib_key(name: str, backend: str) -> str:
    manifest = find(name)
    files, _ = keys.kernel_files(manifest, backend)
    env = environment.build_environment(backend, knobs.cache_dir(), nvcc_optional=True)
    return keys.kernel_lib_key(manifest, backend, files, env).hex


def test_every_key_covers_the_command_lines_by_digest():
    env = environment.build_environment("cpu", knobs.cache_dir())
    assert env["toolchain.command_lines"] == hashlib.sha256(Path(command_lines.__file__).read_bytes()).hexdigest()[:32]
    names = {i.name for i in keys.binding_key("cpu", env).inputs}
    assert "toolchain.command_lines" in names


def test_a_changed_flag_changes_the_keys(edited_command_lines, monkeypatch):
    edit, revert = edited_command_lines
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")  # a CUDA key without a GPU: only keys are compared
    before = (_kernel_lib_key("axpy", "cpu"), _kernel_lib_key("axpy", "cuda"))
    edit()
    after = (_kernel_lib_key("axpy", "cpu"), _kernel_lib_key("axpy", "cuda"))
    assert after[0] != before[0] and after[1] != before[1]
    revert()
    assert (_kernel_lib_key("axpy", "cpu"), _kernel_lib_key("axpy", "cuda")) == before


def test_a_changed_flag_rebuilds_and_the_build_uses_it(kernels_root, private_cache, monkeypatch,
                                                       edited_command_lines):
    """A define added where a kernel library's flags are composed: the next get
    rebuilds and the library sees it; without it, the earlier library comes
    back from the cache. In a cache of its own: the edit rebuilds the shared
    binding too (it is built from the same file), which other tests' caches
    must not hold."""
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(private_cache))
    edit, revert = edited_command_lines
    name = "command_lines_probe"
    source = write_cpu_kernel(kernels_root, name,
                              "#ifndef COMMAND_LINES_PROBE\n#define COMMAND_LINES_PROBE 1\n#endif\n"
                              "  for (int64_t i = 0; i < out.numel; ++i) os[i] = a * xs[i] * COMMAND_LINES_PROBE;")

    def replan():
        # A get whose kernel's files are unchanged trusts what it loaded (a
        # process's environment does not change): touched, it plans again.
        stamp = time.time_ns()
        os.utime(source, ns=(stamp, stamp))

    x = torch.ones(4)
    assert torch.equal(registry.get(name)(x, 1.0), x)
    edit()
    replan()
    assert torch.equal(registry.get(name)(x, 1.0), 7 * x)
    assert any(c.startswith("toolchain.command_lines") for c in registry.status(name).changes)
    revert()
    builds = len(builds_run)
    replan()
    assert torch.equal(registry.get(name)(x, 1.0), x)  # the first library, from the cache
    assert len(builds_run) == builds, "changing the flag back rebuilt the library"


def test_a_kernels_own_language_standard_replaces_the_default():
    """nvcc warns "incompatible redefinition for option 'std'" on every build
    of a launcher given two; g++ takes the last silently. One is passed."""
    assert command_lines.direct_flags(["-O2"], [])[:2] == ["-std=c++20", "-fPIC"]
    own = command_lines.direct_flags(["-O2", "-std=c++17"], ["inc"])
    assert [f for f in own if f.startswith("-std")] == ["-std=c++17"] and own[-1] == "-Iinc"
