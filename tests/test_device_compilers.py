"""The device compilers behind device/compiler.py's protocol: the manifest's
list (the core's kDeviceCompilers) and the protocol's table name the same
compilers, and each one's module makes an object that meets the protocol."""
from __future__ import annotations

import importlib
import pytest

from conftest import CHECKOUT
from device_build_helpers import EXAMPLE, NEEDS_NVCC
from registry import _core
from registry.device import compiler
from registry.device.compiler import COMPILERS, DeviceCompiler


def test_the_manifest_and_the_protocol_list_the_same_compilers():
    assert tuple(COMPILERS) == _core.DEVICE_COMPILERS


@pytest.mark.parametrize("name", [pytest.param("nvrtc"), pytest.param("nvcc-cubin", marks=NEEDS_NVCC)])
def test_each_compiler_module_makes_what_the_protocol_asks(name):
    manifest = _core.parse_manifest(str(CHECKOUT / "kernels" / EXAMPLE / "kernel.toml"))  # no prelude
    made = importlib.import_module(COMPILERS[name]).make(manifest)
    assert isinstance(made, DeviceCompiler), f"{type(made).__name__} lacks part of DeviceCompiler"
    assert "-arch=sm_90" in made.options(manifest, "sm_90")
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in made.key_inputs())


def test_an_unknown_compiler_is_refused_naming_every_known_one(tmp_path):
    folder = tmp_path / "k"
    folder.mkdir()
    (folder / "a.cu").write_text("")
    (folder / "kernel.toml").write_text('format = 1\n[cuda]\ncompiler = "hipcc"\nsources = ["a.cu"]\n'
                                        '[[op]]\nsignature = "f(Tensor x) -> Tensor"\ndtypes = ["float32"]\n')
    with pytest.raises(ValueError) as caught:  # a ManifestError
        _core.parse_manifest(str(folder / "kernel.toml"))
    assert 'use "nvcc" (default), "nvrtc" or "nvcc-cubin"' in str(caught.value), caught.value


def test_the_manifests_compiler_picks_its_module(monkeypatch):
    made = []

    class Fake:
        cuda = type("Cuda", (), {"compiler": "nvcc-cubin"})()

    monkeypatch.setattr(importlib.import_module("registry.device.nvcc_cubin"), "make",
                        lambda manifest: made.append(manifest) or "nvcc")
    manifest = Fake()
    assert compiler.device_compiler(manifest) == "nvcc" and made == [manifest]
