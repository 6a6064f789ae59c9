"""Header packages (tests/test_header_packages.py) on the CUDA build paths,
compiled without a GPU: NVRTC and `nvcc -cubin` (device code in a cubin,
whose mirror holds the package's headers as it holds the kernel's), and nvcc
through torch's load() (a kernel library's .cu, for TORCH_CUDA_ARCH_LIST)."""
from __future__ import annotations

from pathlib import Path

import pytest

from device_build_helpers import NEEDS_CUTLASS, NEEDS_NVCC, build, copy_example, inputs, store  # noqa: F401 (store: a fixture)
from registry import _core
from test_header_packages import FakeCutlass

PACKAGE_LINE = 'format = 1\nheader_packages = ["nvidia-cutlass"]'


def _with_package(kernel, device_source: str, prelude: str) -> None:
    kernel.edit("kernel.toml", "format = 1", PACKAGE_LINE)
    path = kernel.path(device_source)
    path.write_text(prelude + path.read_text())


def test_nvrtc_compiles_a_package_header_and_keys_its_content(tmp_path, store, monkeypatch):
    package = FakeCutlass(tmp_path / "site", "4.2.0.0")
    monkeypatch.syspath_prepend(str(package.site))
    kernel = copy_example(tmp_path / "kernels", "nvrtc", "_pkg")
    _with_package(kernel, "axpy_device.cu",
                  '#include <fakelib/value.h>\nstatic_assert(FAKELIB_VALUE > 1.0f, "the package header");\n')
    first = build(kernel, store)
    assert "file:pkg:nvidia-cutlass/source/include/fakelib/value.h" in inputs(first)
    assert inputs(first)["package:nvidia-cutlass"] == "4.2.0.0"
    package.header("fakelib/value.h", "#pragma once\n#define FAKELIB_VALUE 3.0f\n")
    second = build(kernel, store, first)
    assert second.built is not None and second.key != first.key
    package.set_version("4.3.0")
    third = build(kernel, store, second)
    assert third.key != second.key and inputs(third)["package:nvidia-cutlass"] == "4.3.0"


@NEEDS_NVCC
@NEEDS_CUTLASS
def test_nvcc_cubin_compiles_cute_from_the_installed_wheel(tmp_path, store):
    kernel = copy_example(tmp_path / "kernels", "nvcc-cubin", "_cute")
    _with_package(kernel, "axpy_device.cu",
                  "#include <cute/layout.hpp>\n"
                  "static_assert(decltype(cute::size(cute::make_layout(cute::make_shape(cute::Int<4>{}, "
                  "cute::Int<8>{}))))::value == 32);\n")
    artifact = build(kernel, store)
    assert Path(artifact.path).stat().st_size > 0
    assert "file:pkg:nvidia-cutlass/source/include/cute/layout.hpp" in inputs(artifact)
    assert not [n for n in inputs(artifact) if n.startswith("file:/")]  # no machine's path in the key


@NEEDS_CUTLASS
def test_nvcc_through_load_compiles_a_cutlass_header(axpy_copy, cache_root, cuda_toolkit):
    from registry.builder import ccache, recipe
    from registry.builder.compile import run_build
    _with_package(axpy_copy, "axpy.cu",
                  '#include <cutlass/numeric_types.h>\nstatic_assert(sizeof(cutlass::half_t) == 2, "cutlass");\n')
    manifest = _core.parse_manifest(str(axpy_copy.path("kernel.toml")))
    plan = recipe.lib_plan(manifest, "cuda", "0" * 32)
    staging = Path(_core.CacheStore(str(cache_root)).make_staging_dir())
    with ccache.compiler_environment(cache_root, "9.0"):
        result = run_build(plan, staging)
    assert (staging / result.artifact).is_file()
