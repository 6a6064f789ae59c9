"""The command lines of a build are composed once (registry/command_lines.py)
and the keys hash what composes them: a flag changed there changes the keys
of exactly what it builds, with no recipe string bumped by hand, and the
next `get` builds with it."""
from __future__ import annotations

import os
import time

import pytest

import registry
from isolation_kernels import write_cpu_kernel
from registry import _core, command_lines, environment, knobs
from registry.builder import keys
from registry.builder.step import builds_run
from registry.resolve import locate


@pytest.fixture
def fresh_texts():
    command_lines.key_texts.cache_clear()
    yield
    command_lines.key_texts.cache_clear()


def _manifest(name: str):
    return _core.parse_manifest(locate(name))


def _kernel_lib_key(name: str, backend: str, env: dict) -> str:
    manifest = _manifest(name)
    files, _ = keys.kernel_files(manifest, backend)
    return keys.kernel_lib_key(manifest, backend, files, env).hex


def _env(backend: str) -> dict:
    return environment.build_environment(backend, knobs.cache_dir(), nvcc_optional=True)


def test_the_key_texts_are_the_command_lines_the_builders_run():
    texts = command_lines.key_texts()
    direct = texts["toolchain.direct"].splitlines()
    flags = command_lines.direct_flags(["<cflags>"], ["<include dir>"])
    assert direct[2] == " ".join(command_lines.direct_compile("<c++>", flags, "<source>", "<i>.o", "<i>.d"))
    assert "-std=c++20 -fPIC <cflags> -I<include dir>" in direct[0] and "-Wl,--no-undefined" in direct[0]
    assert "-Wl,-z,defs" in texts["toolchain.kernel_lib"] and "-fvisibility=hidden" in texts["toolchain.kernel_lib"]
    env = environment.build_environment("cpu", knobs.cache_dir())
    assert env["toolchain.direct"] == texts["toolchain.direct"]
    assert env["toolchain.kernel_lib"].startswith(texts["toolchain.kernel_lib"])


def test_a_changed_direct_flag_changes_what_is_built_directly_and_nothing_else(monkeypatch, fresh_texts):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")  # a CUDA key without a GPU: only keys are compared
    before = {"cpu": _kernel_lib_key("axpy", "cpu", _env("cpu")), "cuda": _kernel_lib_key("axpy", "cuda", _env("cuda")),
              "binding": keys.binding_key("cpu", _env("cpu")).hex}
    composed = command_lines.direct_flags
    monkeypatch.setattr(command_lines, "direct_flags", lambda cflags, includes: [*composed(cflags, includes), "-g"])
    command_lines.key_texts.cache_clear()
    after = {"cpu": _kernel_lib_key("axpy", "cpu", _env("cpu")), "cuda": _kernel_lib_key("axpy", "cuda", _env("cuda")),
             "binding": keys.binding_key("cpu", _env("cpu")).hex}
    # The CPU library and the shared binding are compiled by direct.py; axpy's
    # CUDA library by torch's load() (nvcc), which these flags never reach.
    assert after["cpu"] != before["cpu"] and after["binding"] != before["binding"]
    assert after["cuda"] == before["cuda"]


def test_a_changed_kernel_library_flag_rebuilds_and_the_build_uses_it(kernels_root, cache_root, monkeypatch,
                                                                    fresh_texts):
    """A define added where a kernel library's flags are composed: the next get
    rebuilds (the key hashed the composition) and the library sees it; without
    it, the earlier library comes back from the cache."""
    name = "command_lines_probe"
    source = write_cpu_kernel(kernels_root, name,
                     "#ifndef COMMAND_LINES_PROBE\n#define COMMAND_LINES_PROBE 1\n#endif\n"
                     "  for (int64_t i = 0; i < out.numel; ++i) os[i] = a * xs[i] * COMMAND_LINES_PROBE;")
    import torch

    def replan():
        # A get whose kernel's files are unchanged trusts what it loaded (the
        # environment of a process does not change): touched, it plans again.
        stamp = time.time_ns()
        os.utime(source, ns=(stamp, stamp))

    x = torch.ones(4)
    assert torch.equal(registry.get(name)(x, 1.0), x)
    composed = command_lines.kernel_lib_cflags
    monkeypatch.setattr(command_lines, "kernel_lib_cflags",
                        lambda header, flags: [*composed(header, flags), "-DCOMMAND_LINES_PROBE=7"])
    command_lines.key_texts.cache_clear()
    replan()
    op = registry.get(name)
    assert torch.equal(op(x, 1.0), 7 * x)
    assert any(c.startswith("toolchain.kernel_lib") for c in registry.status(name).changes), registry.status(name).changes
    monkeypatch.setattr(command_lines, "kernel_lib_cflags", composed)
    command_lines.key_texts.cache_clear()
    builds = len(builds_run)
    replan()
    assert torch.equal(registry.get(name)(x, 1.0), x)  # the first library, from the cache
    assert len(builds_run) == builds, "reverting the flag rebuilt the library"
