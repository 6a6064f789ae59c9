"""Header libraries from installed Python packages (`header_packages` in
kernel.toml, core/header_packages.h): found through the installed
distribution, searched by every compiler, keyed by the headers' content and
the package's version, named in the manifest without a path.

Edits and upgrades use a fake nvidia-cutlass put first on sys.path (a
dist-info folder and the wheel's layout), never the installed wheel; one test
compiles the real CUTLASS headers where the wheel is installed."""
from __future__ import annotations

import importlib.metadata
import itertools
import os
from pathlib import Path

import pytest
import torch

import registry
from registry import _core
from registry.errors import HeaderPackageMissingError

_names = itertools.count()

MANIFEST = """format = 1
header_packages = ["nvidia-cutlass"]

[cpu]
sources = ["k.cpp"]

[[op]]
signature = "{name}(Tensor x) -> Tensor"
"""

SOURCE = """#include <{header}>
#include "kreg/cpu.h"

KREG_API const char* {name}_f32(kreg_tensor out, kreg_tensor x, void*) {{
  const float* xs = static_cast<const float*>(x.data);
  float* os = static_cast<float*>(out.data);
  for (int64_t i = 0; i < out.numel; ++i) os[i] = xs[i] * ({factor});
  return nullptr;
}}
"""


class FakeCutlass:
    """nvidia-cutlass as pip lays it out: <site>/cutlass_library/source/include
    and .../tools/util/include, and a dist-info folder giving the version."""

    def __init__(self, site: Path, version: str):
        self.site = site
        self.include = site / "cutlass_library" / "source" / "include"
        (site / "cutlass_library" / "source" / "tools" / "util" / "include").mkdir(parents=True)
        self.header("fakelib/value.h", "#pragma once\n#define FAKELIB_VALUE 2.0f\n")
        self.metadata = site / "nvidia_cutlass-4.2.0.0.dist-info" / "METADATA"
        self.metadata.parent.mkdir()
        self.set_version(version)

    def header(self, relative: str, text: str) -> None:
        path = self.include / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def set_version(self, version: str) -> None:
        self.metadata.write_text(f"Metadata-Version: 2.1\nName: nvidia-cutlass\nVersion: {version}\n")


@pytest.fixture
def fake_cutlass(tmp_path, monkeypatch) -> FakeCutlass:
    package = FakeCutlass(tmp_path / "site", "4.2.0.0")
    monkeypatch.syspath_prepend(str(package.site))
    return package


def _kernel(root: Path, header: str, factor: str) -> str:
    name = f"hdrpkg_{next(_names)}"
    folder = root / name
    folder.mkdir()
    (folder / "kernel.toml").write_text(MANIFEST.format(name=name))
    (folder / "k.cpp").write_text(SOURCE.format(name=name, header=header, factor=factor))
    return name


def _inputs(name: str, cache_root: Path) -> dict[str, str]:
    key = registry.status(name, device="cpu").key
    return {i.name: i.value for i in _core.CacheStore(str(cache_root)).lookup(key).entry.inputs}


def test_a_header_of_the_package_builds_and_is_keyed_by_content(fake_cutlass, kernels_root, cache_root):
    name = _kernel(kernels_root, "fakelib/value.h", "FAKELIB_VALUE")
    x = torch.arange(4, dtype=torch.float32)
    assert torch.equal(registry.get(name, device="cpu")(x), x * 2)
    inputs = _inputs(name, cache_root)
    # Labeled inside the package, never by where this machine installed it.
    assert "file:pkg:nvidia-cutlass/source/include/fakelib/value.h" in inputs
    assert inputs["package:nvidia-cutlass"] == "4.2.0.0"
    assert not [n for n in inputs if str(fake_cutlass.site) in n or n.startswith("file:/")], inputs
    assert "/" not in (kernels_root / name / "kernel.toml").read_text().split("header_packages")[1].split("\n")[0]
    first = registry.status(name, device="cpu").key

    fake_cutlass.header("fakelib/value.h", "#pragma once\n#define FAKELIB_VALUE 3.0f\n")
    assert torch.equal(registry.get(name, device="cpu")(x), x * 3)
    status = registry.status(name, device="cpu")
    assert status.key != first and status.outcome == "compiled"
    assert "file:pkg:nvidia-cutlass/source/include/fakelib/value.h changed" in status.changes


def test_an_upgrade_is_named_in_the_changes(fake_cutlass, kernels_root, cache_root):
    name = _kernel(kernels_root, "fakelib/value.h", "FAKELIB_VALUE")
    registry.get(name, device="cpu")
    first = registry.status(name, device="cpu").key
    fake_cutlass.set_version("4.3.0")  # every header as it was
    registry.get(name, device="cpu")
    status = registry.status(name, device="cpu")
    assert status.key != first
    assert "package:nvidia-cutlass: 4.2.0.0 -> 4.3.0" in status.changes
    assert _inputs(name, cache_root)["package:nvidia-cutlass"] == "4.3.0"


def test_a_missing_package_says_which_pip_install_brings_it(kernels_root, monkeypatch):
    name = _kernel(kernels_root, "fakelib/value.h", "FAKELIB_VALUE")
    real = importlib.metadata.distribution

    def without_cutlass(distribution):
        if distribution == "nvidia-cutlass":
            raise importlib.metadata.PackageNotFoundError(distribution)
        return real(distribution)

    monkeypatch.setattr(importlib.metadata, "distribution", without_cutlass)
    with pytest.raises(HeaderPackageMissingError) as caught:
        registry.get(name, device="cpu")
    message = str(caught.value)
    assert "pip install nvidia-cutlass" in message and name in message and "[cutlass]" in message
    assert isinstance(caught.value, ModuleNotFoundError) and isinstance(caught.value, registry.RegistryError)


def test_the_include_path_of_every_compiler_holds_the_package(fake_cutlass, kernels_root):
    """The nvcc and direct builds take plan.include_dirs / keys.include_dirs;
    the cubin paths mirror the package's folder like the kernel's."""
    from registry.builder import keys
    from registry.device import cubin_build

    name = _kernel(kernels_root, "fakelib/value.h", "FAKELIB_VALUE")
    manifest = _core.parse_manifest(str(kernels_root / name / "kernel.toml"))
    package_dirs = [str(fake_cutlass.include), str(fake_cutlass.include.parent / "tools" / "util" / "include")]
    dirs = keys.include_dirs(manifest)
    assert dirs[-3:-1] == package_dirs  # after the kernel's own, before the registry's
    mirrored = dict(cubin_build.mirror_roots(manifest))
    assert mirrored[os.path.realpath(fake_cutlass.site / "cutlass_library")] == "p0"


@pytest.mark.skipif(not any(d.metadata["Name"] == "nvidia-cutlass" for d in importlib.metadata.distributions()),
                    reason="nvidia-cutlass is not installed (pip install nvidia-cutlass)")
def test_a_cpu_kernel_includes_the_installed_cutlass(kernels_root, cache_root):
    name = _kernel(kernels_root, "cutlass/gemm_coord.h", "cutlass::gemm::GemmCoord(1, 2, 3).product()")
    x = torch.arange(4, dtype=torch.float32)
    assert torch.equal(registry.get(name, device="cpu")(x), x * 6)
    inputs = _inputs(name, cache_root)
    assert "file:pkg:nvidia-cutlass/source/include/cutlass/coord.h" in inputs  # the scan followed into it
    assert inputs["package:nvidia-cutlass"] == importlib.metadata.version("nvidia-cutlass")


def test_an_aot_package_carries_the_package_headers_it_includes(fake_cutlass, kernels_root, tmp_path):
    from registry.tools import aot

    fake_cutlass.header("fakelib/unused.h", "#pragma once\n")
    name = _kernel(kernels_root, "fakelib/value.h", "FAKELIB_VALUE")
    out = aot.export_package(name, tmp_path / "pkg", backends=["cpu"])
    copied = out / "csrc" / "packages" / "nvidia-cutlass" / "source" / "include" / "fakelib"
    assert (copied / "value.h").read_text() == (fake_cutlass.include / "fakelib" / "value.h").read_text()
    assert not (copied / "unused.h").exists()  # what the kernel includes, not the whole package
    spec = (out / "kreg_build_spec.json").read_text()
    assert "csrc/packages/nvidia-cutlass/source/include" in spec and str(fake_cutlass.site) not in spec
