"""Each piece of vocabulary has one owner, which the rest import from: a
second spelling (a re-export, a copied rule) drifts from the first."""
from __future__ import annotations

import types

import pytest

from registry import environment, resolve
from registry.builder import build_processes, misses, progress
from registry.errors import RegistryError


def test_stopping_a_process_builds_is_imported_from_its_owner():
    assert not hasattr(progress, "stop_builds_of_this_process")
    source = open(misses.__file__).read()
    assert "from registry.builder.build_processes import stop_builds_of_this_process" in source
    assert callable(build_processes.stop_builds_of_this_process)


def test_which_backend_a_manifest_gets_has_one_rule():
    assert not hasattr(resolve, "choose_backend")  # environment.for_manifest is the one rule
    # As _core.BackendSpec reads: device_compiler names a device compiler with its own cubin, else "".
    spec = lambda present, compiler="nvcc": types.SimpleNamespace(  # noqa: E731
        present=present, compiler=compiler, device_compiler="" if compiler == "nvcc" else compiler)
    cpu_only = types.SimpleNamespace(name="k", file="k/kernel.toml", binding="generated",
                                     cpu=spec(True), cuda=spec(False))
    assert environment.for_manifest(cpu_only, "cpu", "/nonexistent") == "cpu"
    with pytest.raises(RegistryError, match=r"no \[cuda\] section .* device='cpu'"):
        environment.for_manifest(cpu_only, "cuda", "/nonexistent")
    nvrtc_pybind = types.SimpleNamespace(name="k", file="k/kernel.toml", binding="pybind",
                                         cpu=spec(True), cuda=spec(True, "nvrtc"))
    with pytest.raises(RegistryError, match="needs the generated binding"):
        environment.for_manifest(nvrtc_pybind, "cuda", "/nonexistent")
