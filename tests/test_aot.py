"""The AOT path: a manifest exported as an installable package (registry/tools/aot.py),
built by pip with setuptools + BuildExtension, and imported in a fresh
interpreter that never imports the JIT registry.

The build tests compile two torch units each (~30-40 s on two cores), so they
are marked slow; they need no GPU and run in CI. The CUDA variant is marked gpu.
"""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import _counter
from device_build_helpers import PATHS, copy_example
from registry.errors import RegistryError
from registry.tools import aot

# Runs in the fresh interpreter: the package as production code would use it.
CHECK = """
import ctypes, sys
import torch
import axpy_ops

assert axpy_ops.__file__.startswith(sys.argv[1]), axpy_ops.__file__
assert axpy_ops.ops is torch.ops.axpy
devices = sys.argv[2].split(",")
for device in devices:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(1001, generator=gen).to(device, dtype)
        y = torch.randn(1001, generator=gen).to(device, dtype)
        expected = (1.5 * x.float() + y.float()).to(dtype)  # computed in float, rounded once
        torch.testing.assert_close(torch.ops.axpy.axpy(x, y, 1.5), expected)
        torch.testing.assert_close(axpy_ops.axpy(x, y, 1.5), expected)
        torch.library.opcheck(torch.ops.axpy.axpy.default, (x, y, 1.5))
    # The JIT binding's checks, with its messages.
    try:
        torch.ops.axpy.axpy(x.double(), y.double(), 1.0)
        raise AssertionError("float64 was accepted")
    except RuntimeError as error:
        assert "the manifest lists float32, float16, bfloat16" in str(error), error
    try:
        torch.ops.axpy.axpy(x, y[:3], 1.0)
        raise AssertionError("mismatched shapes were accepted")
    except RuntimeError as error:
        assert "argument 'y' has shape [3]" in str(error), error
    # A meta tensor among real ones reaches the fake kernel (Meta wins dispatch): it must raise.
    try:
        torch.ops.axpy.axpy(x, torch.empty_like(y, device="meta"), 1.0)
        raise AssertionError("a real and a meta input were accepted")
    except RuntimeError as error:
        assert "argument 'y' is on meta" in str(error), error
    assert torch.ops.axpy.axpy(x.to("meta"), y.to("meta"), 1.0).device.type == "meta"

# CPU and CUDA launchers share names: each module keeps its own private.
for module in ("_C_cpu", "_C_cuda"):
    if getattr(axpy_ops, module, None) is not None:
        assert not hasattr(ctypes.CDLL(getattr(axpy_ops, module).__file__), "axpy_f32"), module
assert "registry" not in sys.modules, "the package imported the JIT registry"
print("AOT-OK")
"""


def build_spec(out: Path) -> dict:
    """What the package's setup.py builds (kreg_build_spec.json)."""
    return json.loads((out / "kreg_build_spec.json").read_text())


def _export_and_install(tmp_path: Path, backends, env=None) -> Path:
    package = aot.export_package("axpy", tmp_path / "axpy_pkg", backends=backends)
    target = tmp_path / "site"
    # --no-build-isolation: build against this torch (an isolated build would
    # fetch another); --no-index: nothing is downloaded.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(package)],
        capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    assert result.returncode == 0, f"pip failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return target


def _run_fresh(target: Path, devices: str, tmp_path: Path) -> None:
    # Only the install folder on the path, and a working folder outside the
    # checkout, so nothing but the installed package can be imported.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECK), str(target), devices],
                            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0 and "AOT-OK" in result.stdout, result.stdout + result.stderr


@pytest.mark.slow
def test_cpu_package_builds_and_runs_without_the_registry(tmp_path):
    target = _export_and_install(tmp_path, ["cpu"])
    built = sorted(p.name.split(".")[0] for p in (target / "axpy_ops").glob("*.so"))
    assert built == ["_C", "_C_cpu"]
    _run_fresh(target, "cpu", tmp_path)


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_package_builds_and_runs_beside_the_cpu_one(tmp_path):
    # KREG_AOT_CUDA=1: a missing nvcc fails the build instead of skipping the module.
    target = _export_and_install(tmp_path, None, env={"KREG_AOT_CUDA": "1"})
    built = sorted(p.name.split(".")[0] for p in (target / "axpy_ops").glob("*.so"))
    assert built == ["_C", "_C_cpu", "_C_cuda"]
    _run_fresh(target, "cpu,cuda", tmp_path)


# ---- export only (fast) -------------------------------------------------------


def test_export_writes_a_self_contained_package(tmp_path):
    out = aot.export_package("axpy", tmp_path / "pkg", backends=["cpu"])
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"setup.py", "README.md", "axpy_ops/__init__.py", "csrc/generated/axpy_def.cpp",
            "csrc/generated/axpy_impl_cpu.cpp", "csrc/kernel/axpy_cpu.cpp", "csrc/kernel/axpy.h",
            "csrc/kernel/axpy_math.h", "csrc/kernel/include/axpy/config.h", "csrc/kernel/kernel.toml",
            "csrc/include/kreg/abi.h", "csrc/include/kreg/cpu.h"} <= files
    assert "csrc/kernel/axpy.cu" not in files and "csrc/generated/axpy_impl_cuda.cpp" not in files
    setup, spec = (out / "setup.py").read_text(), build_spec(out)
    assert spec["cpu_cxx_flags"] == ["-O3"] and "csrc/kernel/include" in spec["include_dirs"]
    assert "cuda" not in spec["sources"]  # no CUDA sources listed
    init = (out / "axpy_ops" / "__init__.py").read_text()
    assert "import registry" not in init and "from registry" not in init
    assert 'torch.library.register_fake("axpy::axpy")(_fake_axpy)' in init and "_C_cuda" not in init
    assert "def _fake_axpy(x, y, alpha):" in init  # from the manifest's output declaration
    compile(init, "__init__.py", "exec")
    compile(setup, "setup.py", "exec")


def test_default_exports_every_backend_with_optional_cuda(tmp_path):
    out = aot.export_package("axpy", tmp_path / "pkg")
    assert (out / "csrc/kernel/axpy.cu").is_file() and (out / "csrc/generated/axpy_impl_cuda.cpp").is_file()
    assert build_spec(out)["nvcc_flags"] == ["-Xcompiler=-fvisibility=hidden", "-O3", "-lineinfo"]
    init = (out / "axpy_ops" / "__init__.py").read_text()
    assert "try:\n    from . import _C_cuda" in init and "except ImportError" in init


def test_reexport_replaces_a_previous_export_but_not_a_foreign_folder(tmp_path):
    out = aot.export_package("axpy", tmp_path / "pkg")
    (out / "axpy_ops" / "_C_cuda.stale.so").write_text("")
    aot.export_package("axpy", out, backends=["cpu"])
    assert not (out / "axpy_ops" / "_C_cuda.stale.so").exists() and not (out / "csrc/kernel/axpy.cu").exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(RegistryError, match="not a package the registry exported"):
        aot.export_package("axpy", foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_asking_for_a_missing_backend_says_what_to_do(tmp_path, axpy_copy):
    text = axpy_copy.path("kernel.toml").read_text()
    axpy_copy.path("kernel.toml").write_text(text.replace('[cuda]\nsources = ["axpy.cu"]\ncflags = ["-O3", "-lineinfo"]\n', ""))
    with pytest.raises(RegistryError, match=r"no \[cuda\] section.*export backends=\['cpu'\]"):
        aot.export_package(axpy_copy.name, tmp_path / "pkg", backends=["cuda"])
    with pytest.raises(ValueError, match="not one of cpu, cuda"):
        aot.export_package(axpy_copy.name, tmp_path / "pkg", backends=["rocm"])


def test_the_cpu_module_gets_the_hosts_f16c_flag_as_the_jit_build_does(tmp_path):
    # Without -mf16c every half <-> float conversion is a library call: the
    # JIT's CPU builds add it where the CPU has F16C (core/toolchain.h); the
    # package's setup.py decides on the machine that builds it.
    from registry import _core

    out = aot.export_package("axpy", tmp_path / "pkg", backends=["cpu"])
    setup = runpy.run_path(str(out / "setup.py"))  # not as __main__: its functions, no setup() call
    modules = {m.name: m for m in setup["extensions"](setup["read_spec"](str(out)), str(out))}
    cpu_flags = modules["axpy_ops._C_cpu"].extra_compile_args
    assert ("-mf16c" in cpu_flags) == ("-mf16c" in _core.HOST_CXX_FLAGS), cpu_flags
    assert cpu_flags.index("-O3") > (cpu_flags.index("-mf16c") if "-mf16c" in cpu_flags else -1)  # the manifest's win


@pytest.mark.parametrize("compiler", PATHS)
def test_a_cubin_kernel_carries_its_device_code_for_each_architecture(tmp_path, kernels_root, monkeypatch, compiler):
    """compiler = "nvrtc" / "nvcc-cubin": the export builds the cubin per
    architecture asked for (the registry's own device compiler, no GPU
    needed) and the package carries it, the launch runtime and its binder."""
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX")
    kernel = copy_example(kernels_root, compiler, f"_aot{next(_counter)}").name
    out = aot.export_package(kernel, tmp_path / "pkg")
    package = out / aot.package_name(kernel)
    cubins = sorted(p.name for p in (package / "_device").iterdir())
    assert cubins == ["sm_80.cubin", "sm_90.cubin"], cubins
    assert all((package / "_device" / c).read_bytes()[:4] == b"\x7fELF" for c in cubins)
    spec = build_spec(out)
    assert "csrc/include/kreg/launch_runtime.cc" in spec["sources"]["cuda"] and spec["package_data"] == ["_device/*.cubin"]
    assert spec["cuda_cxx_flags"] == ["-O3"]  # [cuda] cflags reach the host launchers' compiler
    init = (package / "__init__.py").read_text()
    assert "from ._device_module import bind" in init and (package / "_device_module.py").is_file()
    # The binder imports nothing of the registry.
    binder = (package / "_device_module.py").read_text()
    assert "import registry" not in binder and "from registry" not in binder


def test_a_cubin_kernel_without_an_architecture_is_exported_for_the_cpu_saying_why(
        tmp_path, kernels_root, monkeypatch):
    from registry import environment

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(environment, "_device_answer", lambda root: "none")
    kernel = copy_example(kernels_root, "nvrtc", f"_aot{next(_counter)}").name
    with pytest.warns(RuntimeWarning, match="exporting without the CUDA kernels.*TORCH_CUDA_ARCH_LIST"):
        out = aot.export_package(kernel, tmp_path / "pkg")
    assert not (out / aot.package_name(kernel) / "_device").exists()
    with pytest.raises(RegistryError, match="its CUDA kernels cannot be built here"):
        aot.export_package(kernel, tmp_path / "pkg2", backends=["cuda"])


CUBIN_CHECK = """
import sys
import torch
import importlib

package = importlib.import_module(sys.argv[1])
ops = getattr(torch.ops, sys.argv[2])
assert package.__file__.startswith(sys.argv[3]), package.__file__
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(100003, generator=gen).to("cuda", dtype)
    y = torch.randn(100003, generator=gen).to("cuda", dtype)
    torch.testing.assert_close(ops.axpy(x, y, 1.5), (1.5 * x.float() + y.float()).to(dtype))
    torch.library.opcheck(ops.axpy.default, (x, y, 1.5))
compiled = torch.compile(lambda a, b: ops.axpy(a, b, 1.5), fullgraph=True)
assert torch.equal(compiled(x, y), ops.axpy(x, y, 1.5))
assert "registry" not in sys.modules, "the package imported the JIT registry"
print("AOT-OK")
"""


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("compiler", PATHS)
def test_a_cubin_package_builds_and_runs_from_its_carried_device_code(tmp_path, kernels_root, monkeypatch, compiler):
    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    kernel = copy_example(kernels_root, compiler, f"_aot{next(_counter)}")
    package = aot.export_package(kernel.name, tmp_path / "pkg", backends=["cuda"])
    target = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(package)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "KREG_AOT_CUDA": "1"})
    assert result.returncode == 0, f"pip failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    assert list((target / aot.package_name(kernel.name) / "_device").glob("*.cubin"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    namespace = kernel.name  # the manifest names none: the kernel's name
    result = subprocess.run([sys.executable, "-c", CUBIN_CHECK, aot.package_name(kernel.name), namespace,
                             str(target)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0 and "AOT-OK" in result.stdout, result.stdout + result.stderr


PYBIND_SOURCE = r"""
#include <torch/extension.h>
#include "axpy.h"

torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) { return alpha * x + y; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("axpy", &axpy, "axpy");
  // m.def("axpy_twice", ...): not yet
}
"""


def test_a_pybind_module_without_a_manifest_op_is_not_exported(tmp_path, axpy_copy):
    axpy_copy.path("axpy_pybind.cpp").write_text(PYBIND_SOURCE)
    axpy_copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "pybind"\nbinding_source = "axpy_pybind.cpp"')
    axpy_copy.path("kernel.toml").write_text(axpy_copy.path("kernel.toml").read_text() + (
        '\n[[op]]\nsignature = "axpy_twice(Tensor x, Tensor y, float alpha) -> Tensor"\n'
        'launcher = "axpy"\ndtypes = ["float32"]\n'))
    with pytest.raises(RegistryError) as info:
        aot.export_package(axpy_copy.name, tmp_path / "pkg", backends=["cpu"])
    message = str(info.value)
    assert "op 'axpy_twice'" in message and "axpy_pybind.cpp" in message, message
    assert "defines axpy" in message, message
    assert not (tmp_path / "pkg").exists()  # nothing half-written


def test_the_module_check_names_the_missing_op_and_what_the_module_defines(axpy_copy):
    import types

    from registry import load
    from registry.resolve import find

    axpy_copy.path("kernel.toml").write_text(axpy_copy.path("kernel.toml").read_text() + (
        '\n[[op]]\nsignature = "axpy_twice(Tensor x, Tensor y, float alpha) -> Tensor"\n'
        'launcher = "axpy"\ndtypes = ["float32"]\n'))
    manifest = find(axpy_copy.name)
    module = types.SimpleNamespace(axpy=len, helper=len, _private=len, __name__="m", VERSION=3)
    with pytest.raises(RegistryError, match=r"op 'axpy_twice'.*defines axpy, helper"):
        load.check_module_ops(manifest, load.module_functions(module), "the module m")
    load.check_module_ops(manifest, ["axpy", "axpy_twice"], "the module m")  # all there: no error


# ---- autograd: the manifest's backward in the package ---------------------------

# Runs in the fresh interpreter: gradients through the package's torch.ops.rmsnorm.
CHECK_GRAD = """
import sys
import torch
import rmsnorm_ops

def reference(x, w, g):
    x, w = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    return torch.autograd.grad(y, (x, w), g.double())

gen = torch.Generator().manual_seed(0)
x = torch.randn(6, 64, generator=gen).requires_grad_()
w = torch.randn(64, generator=gen).requires_grad_()
g = torch.randn(6, 64, generator=gen)
(torch.ops.rmsnorm.rmsnorm(x, w) * g).sum().backward()
for got, exact in zip((x.grad, w.grad), reference(x, w, g)):
    torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=2e-5)
x.grad = w.grad = None
torch.ops.rmsnorm.rmsnorm(x, w).sum().backward()  # an expanded (stride-0) gradient
for got, exact in zip((x.grad, w.grad), reference(x, w, torch.ones(6, 64))):
    torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=2e-5)
x64, w64 = torch.randn(3, 17, dtype=torch.float64, requires_grad=True), torch.randn(17, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda a, b: torch.ops.rmsnorm.rmsnorm(a, b, 1e-6), (x64, w64))
assert torch.ops.rmsnorm.rmsnorm(x, w).requires_grad
torch.library.opcheck(torch.ops.rmsnorm.rmsnorm.default, (x, w, 1e-6))
compiled = torch.compile(lambda a, b: torch.ops.rmsnorm.rmsnorm(a, b), fullgraph=True)
a, b = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
(compiled(a, b) * g).sum().backward()
for got, exact in zip((a.grad, b.grad), reference(x, w, g)):
    torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=2e-5)
assert "registry" not in sys.modules, "the package imported the JIT registry"
print("AOT-OK")
"""


def test_export_registers_the_manifests_backward(tmp_path):
    out = aot.export_package("rmsnorm", tmp_path / "pkg", backends=["cpu"])
    init = (out / "rmsnorm_ops" / "__init__.py").read_text()
    assert "from . import _autograd" in init and "_autograd.register(_autograd_library, 'rmsnorm', 'rmsnorm'," in init
    assert "'rmsnorm_backward'" in init and "_autograd.register(_autograd_library, 'rmsnorm', 'rmsnorm_backward'" \
        not in init  # the backward op itself has none
    autograd = (out / "rmsnorm_ops" / "_autograd.py").read_text()
    assert "import registry" not in autograd and "from registry" not in autograd
    compile(init, "__init__.py", "exec")
    axpy = aot.export_package("axpy", tmp_path / "axpy_pkg", backends=["cpu"])
    assert not (axpy / "axpy_ops" / "_autograd.py").exists()  # no backward in its manifest


@pytest.mark.slow
def test_cpu_package_gives_the_manifests_gradients(tmp_path):
    package = aot.export_package("rmsnorm", tmp_path / "rmsnorm_pkg", backends=["cpu"])
    target = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(package)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"pip failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECK_GRAD)],
                            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0 and "AOT-OK" in result.stdout, result.stdout + result.stderr


def test_export_keeps_the_manifests_namespace(tmp_path, axpy_copy):
    """namespace = "lab" makes the JIT op torch.ops.lab.axpy; the package's op has the same name."""
    axpy_copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "torch-library"\nnamespace = "lab"')
    out = aot.export_package(axpy_copy.name, tmp_path / "pkg", backends=["cpu"])
    assert "TORCH_LIBRARY(lab, m)" in (out / "csrc" / "generated" / f"{axpy_copy.name}_def.cpp").read_text()
    assert "TORCH_LIBRARY_IMPL(lab, CPU, m)" in (out / "csrc" / "generated" /
                                                  f"{axpy_copy.name}_impl_cpu.cpp").read_text()
    init = (out / f"{aot.package_name(axpy_copy.name)}" / "__init__.py").read_text()
    assert "ops = torch.ops.lab" in init and 'register_fake("lab::axpy")' in init


def test_an_arch_specific_kernel_builds_its_package_for_the_arch_specific_target(tmp_path):
    """kernels/gemm needs sm_90a: its package's setup.py turns TORCH_CUDA_ARCH_LIST's 9.0 into 9.0a,
    as the JIT build does, rather than build a CUTLASS body that only prints an error."""
    pytest.importorskip("cutlass_library")
    out = aot.export_package("gemm", tmp_path / "pkg", backends=["cpu", "cuda"])
    assert build_spec(out)["arch_specific"] is True
    setup = runpy.run_path(str(out / "setup.py"))  # not as __main__: its functions, no setup() call
    assert setup["arch_specific_list"]("8.0;9.0+PTX;10.0") == "8.0;9.0a+PTX;10.0a"
    assert build_spec(aot.export_package("axpy", tmp_path / "axpy_pkg"))["arch_specific"] is False
