"""AOT wheels (registry/tools/aot_wheel.py): the JIT's own stable-ABI builds
as one installable wheel, used in a fresh interpreter with no registry
(tests/wheel_use.py) and compared bit for bit with the registry's ops.
Exporting needs the builds (a minute the first time), so these are slow; the
CUDA one is marked gpu. The wheel built here and used on another torch and
Python is bench/gpu/aot_wheels.sh's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import registry
from registry.errors import RegistryError
from device_build_helpers import PATHS, copy_example
from registry.tools.aot_wheel import export_wheel
from wheel_use import inputs, op_name

pytestmark = pytest.mark.usefixtures("cache_root")
USE = Path(__file__).with_name("wheel_use.py")


def _install(wheels: list[Path], site: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                           str(site), *map(str, wheels)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]  # pip checks each file against RECORD


def _use_and_compare(kernels: list[str], device: str, tmp_path: Path, wheels: list[Path] | None = None) -> str:
    site, out = tmp_path / "site", tmp_path / f"out-{device}.pt"
    if wheels is None:
        wheels = [export_wheel(k, tmp_path / "dist", backends=[device]) for k in kernels]
    if not site.exists():
        _install(wheels, site)
    done = subprocess.run([sys.executable, "-I", str(USE), str(site), device, str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    used = torch.load(out)
    assert sorted(used) == sorted(kernels)
    for kernel in kernels:
        op = registry.get(kernel, device=device)
        op = op if isinstance(op, registry.Op) else getattr(op, op_name(kernel))
        for args, got in zip(inputs(kernel, device), used[kernel]):
            want = op(*args)
            if want is None:  # in place: the argument is the result
                want = args[0]
            for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
                assert torch.equal(a, b.cpu()), f"{kernel}: the wheel's result differs from the registry op's"
    return done.stdout


@pytest.mark.slow
def test_a_cpu_wheel_runs_without_the_registry_bit_for_bit(tmp_path):
    out = _use_and_compare(["axpy", "layernorm", "scale"], "cpu", tmp_path)
    assert "no registry imported" in out, out


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_wheel_runs_without_the_registry_bit_for_bit(tmp_path):
    out = _use_and_compare(["axpy", "axpy_nvrtc", "layernorm", "scale"], "cuda", tmp_path)
    assert "no registry imported" in out, out


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("compiler", PATHS)
def test_a_cubin_kernels_wheel_launches_its_carried_cubin_bit_for_bit(tmp_path, kernels_root, compiler):
    """Both cubin paths (NVRTC, nvcc -cubin): the wheel's launchers bind the
    cubin it carries for this GPU, and compute what the registry's op does."""
    kernel = copy_example(kernels_root, compiler, "_gpu_wheel").name
    out = _use_and_compare([kernel], "cuda", tmp_path)
    assert f"{kernel}: 3 calls on cuda" in out and "no registry imported" in out, out


CARRIED = os.environ.get("KREG_CARRIED_WHEELS")


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not CARRIED or not torch.cuda.is_available(),
                    reason="needs a CUDA device and KREG_CARRIED_WHEELS: a folder of wheels built on another machine")
def test_wheels_built_on_another_torch_and_python_run_here_bit_for_bit(tmp_path, monkeypatch):
    """bench/gpu/aot_wheels.sh: wheels a development machine built (another
    torch, another Python, no GPU) installed and used here, both backends.
    Kernels that are not in the checkout's library (a copy of axpy_nvrtc
    built by nvcc -cubin) come with them, under kernels/."""
    if (Path(CARRIED) / "kernels").is_dir():
        monkeypatch.setenv("REGISTRY_KERNELS_PATH", os.pathsep.join(
            [str(Path(CARRIED) / "kernels"), os.environ.get("REGISTRY_KERNELS_PATH", "")]))
    wheels = sorted(Path(CARRIED).glob("*.whl"))
    kernels = sorted(w.name.split("_ops-")[0] for w in wheels)
    for device in ("cuda", "cpu"):
        out = _use_and_compare(kernels, device, tmp_path, wheels)
        print(out)
        assert "no registry imported" in out, out


@pytest.mark.slow
def test_the_wheel_is_tagged_for_every_python_and_names_its_torch(tmp_path):
    wheel = export_wheel("axpy", tmp_path, backends=["cpu"])
    assert wheel.name.startswith("axpy_ops-1.0.0-cp310-abi3-linux_")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read("axpy_ops-1.0.0.dist-info/METADATA").decode()
    assert {"axpy_ops/__init__.py", "axpy_ops/_runtime.py", "axpy_ops/_spec.json", "axpy_ops/_kernel_cpu.so",
            "axpy_ops/_binding_cpu.so"} <= names
    assert "Requires-Dist: torch>=2.11" in metadata


def test_a_hand_written_pybind_module_has_no_wheel(axpy_copy, tmp_path):
    axpy_copy.path("axpy_pybind.cpp").write_text("// PYBIND11_MODULE(...)\n")
    axpy_copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "pybind"\nbinding_source = "axpy_pybind.cpp"')
    with pytest.raises(RegistryError, match="no wheel for every torch"):
        export_wheel(axpy_copy.name, tmp_path)


@pytest.mark.slow
def test_the_command_line_writes_the_wheel_and_refuses_mixed_destinations(tmp_path, capsys):
    from registry.tools import cli

    assert cli.main(["aot", "scale", "--wheel", str(tmp_path), "--backend", "cpu"]) == 0
    assert [p.name for p in tmp_path.glob("*.whl")] == ["scale_ops-1.0.0-cp310-abi3-linux_" + os.uname().machine +
                                                        ".whl"]
    with pytest.raises(SystemExit):
        cli.main(["aot", "scale", "--wheel", str(tmp_path), "--out", str(tmp_path / "pkg")])
    assert "--wheel writes a wheel alone" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("compiler", PATHS)
def test_a_cubin_kernels_wheel_carries_its_device_code_for_each_architecture(tmp_path, kernels_root, monkeypatch,
                                                                               compiler):
    """compiler = "nvrtc" / "nvcc-cubin": the CUDA backend's launchers bind a
    carried cubin at import, one per architecture asked for; built with no GPU."""
    if torch.version.cuda is None:
        pytest.skip("needs a CUDA torch: the CUDA binding links its libraries")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    kernel = copy_example(kernels_root, compiler, "_wheel").name
    with zipfile.ZipFile(export_wheel(kernel, tmp_path)) as archive:
        names = set(archive.namelist())
        spec = json.loads(archive.read(f"{kernel}_ops/_spec.json"))
    package = f"{kernel}_ops"
    assert {f"{package}/_device/sm_80.cubin", f"{package}/_device/sm_90.cubin", f"{package}/_device_module.py",
            f"{package}/_kernel_cuda.so", f"{package}/_binding_cuda.so", f"{package}/_kernel_cpu.so"} <= names
    assert spec["backends"]["cuda"]["device"] is True and "device" not in spec["backends"]["cpu"]


def test_the_wheel_hands_the_binding_what_the_jit_does():
    """kreg_init's tuple is written twice: in load.py and in the runtime a wheel
    carries (which cannot import the registry). They must not drift apart."""
    import ast

    from registry import load
    from registry.tools import aot_wheel_runtime

    def runtime_tuple() -> str:
        tree = ast.parse(Path(aot_wheel_runtime.__file__).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "init"]
        assert len(calls) == 1
        return ast.dump(calls[0].args[0])

    def jit_tuple() -> str:  # what load.binding_config returns
        tree = ast.parse(Path(load.__file__).read_text())
        config = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "binding_config")
        returns = [n for n in ast.walk(config) if isinstance(n, ast.Return)]
        assert len(returns) == 1
        return ast.dump(returns[0].value)

    assert runtime_tuple() == jit_tuple()


# In the fresh interpreter: softmax's and layernorm's wheels called with
# arguments left to their defaults and given by keyword, through the
# package's function, torch.ops and torch.compile; results saved in order.
DEFAULTS = """
import sys

import torch

sys.path.insert(0, sys.argv[1])
import layernorm_ops
import softmax_ops

g = torch.Generator().manual_seed(3)
x, w, b = torch.randn(4, 33, generator=g), torch.randn(33, generator=g), torch.randn(33, generator=g)
got = [softmax_ops.softmax(x), softmax_ops.softmax(x, temperature=2.0), torch.ops.softmax.softmax(x),
       torch.ops.softmax.softmax(x, temperature=2.0),
       torch.compile(lambda t: softmax_ops.softmax(t, temperature=0.5), fullgraph=True)(x),
       layernorm_ops.layernorm(x, w, None)[0], layernorm_ops.layernorm(x, weight=w, bias=b, eps=1e-3)[0],
       torch.ops.layernorm.layernorm(x, w, bias=b)[0]]
assert "registry" not in sys.modules
torch.save([x, w, b, got], sys.argv[2])
"""


@pytest.mark.slow
def test_a_wheels_ops_take_defaults_and_keywords_as_the_registry_op_does(tmp_path):
    wheels = [export_wheel(k, tmp_path / "dist", backends=["cpu"]) for k in ("softmax", "layernorm")]
    _install(wheels, tmp_path / "site")
    out = tmp_path / "out.pt"
    done = subprocess.run([sys.executable, "-I", "-c", DEFAULTS, str(tmp_path / "site"), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    x, w, b, got = torch.load(out)
    softmax = registry.get("softmax", device="cpu")
    layernorm = registry.get("layernorm", device="cpu")
    want = [softmax(x, 1.0), softmax(x, 2.0), softmax(x, 1.0), softmax(x, 2.0), softmax(x, 0.5),
            layernorm(x, w, None, 1e-5)[0], layernorm(x, w, b, 1e-3)[0], layernorm(x, w, b, 1e-5)[0]]
    for i, (a, e) in enumerate(zip(got, want)):
        assert torch.equal(a, e), f"call {i} of the wheel differs from the registry op's"
    assert not torch.equal(got[0], got[1])  # the default (1.0) was used, not the keyword's value
