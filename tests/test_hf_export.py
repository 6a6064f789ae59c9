"""The AOT package in the Hugging Face kernels layout (registry/tools/hf_export.py),
loaded by the kernels package itself (a test dependency, pinned in pyproject's
test extra) with kernels.get_local_kernel, offline, in a fresh interpreter.

The build tests compile the package (~1-2 min on two cores), so they are
marked slow; the CPU one needs no GPU and runs in CI. The CUDA one is marked gpu.
"""
from __future__ import annotations

import contextlib
import io
import os
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import registry
from registry.errors import RegistryError
from registry.tools import cli, hf_export
from aot_install import offline_hub_env

DTYPES = {"float32": (torch.float32, torch.int32), "float16": (torch.float16, torch.int16),
          "bfloat16": (torch.bfloat16, torch.int16)}

# Runs in the fresh interpreter, offline: the variant as kernels loads it. Saves
# what it computed for the parent to compare with the registry's op.
LOAD = """
import sys
from pathlib import Path

import kernels
import torch

repo, backend, device, out = Path(sys.argv[1]), sys.argv[2] or None, sys.argv[3], sys.argv[4]
kernel = kernels.get_local_kernel(repo, backend=backend)
assert Path(kernel.__file__).parent.parent == repo / "build", kernel.__file__
assert kernel.ops is torch.ops.axpy and kernel.axpy.__doc__.startswith("axpy(Tensor x"), kernel.axpy.__doc__
results = {}
for name in ("float32", "float16", "bfloat16"):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4099, generator=gen).to(device, getattr(torch, name))
    y = torch.randn(4099, generator=gen).to(device, getattr(torch, name))
    results[name] = (x.cpu(), y.cpu(), kernel.axpy(x, y, 1.5).cpu(), torch.ops.axpy.axpy(x, y, -0.25).cpu())
    if device == "cuda":  # the CUDA variant keeps the CPU kernels
        results[name + "@cpu"] = kernel.axpy(x.cpu(), y.cpu(), 1.5)
try:
    kernel.axpy(x, y[:3], 1.0)
    raise AssertionError("mismatched shapes were accepted")
except RuntimeError as error:
    assert "argument 'y' has shape [3]" in str(error), error
compiled = torch.compile(lambda a, b: kernel.axpy(a, b, 1.5), fullgraph=True)
assert torch.equal(compiled(x, y), kernel.axpy(x, y, 1.5))
assert "registry" not in sys.modules, "the variant imported the JIT registry"
torch.save(results, out)
print("HF-OK", Path(kernel.__file__).parent.name)
"""


def _load_fresh(repo: Path, backend: str | None, device: str, tmp_path: Path) -> tuple[dict, str]:
    """What LOAD computed, and the variant kernels chose."""
    out = tmp_path / "results.pt"
    env = offline_hub_env(tmp_path)  # offline, an empty Hub cache, no JIT registry on the path
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(LOAD), str(repo), backend or "", device, str(out)],
                            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0 and "HF-OK" in result.stdout, result.stdout + result.stderr
    return torch.load(out), result.stdout.split("HF-OK ")[1].split()[0]


def _assert_bitwise_like_the_registry(results: dict, device: str) -> None:
    op = registry.get("axpy", device=device)
    for name, (dtype, bits) in DTYPES.items():
        x, y, got, got_ops = results[name]
        x, y = x.to(device), y.to(device)
        for alpha, value in ((1.5, got), (-0.25, got_ops)):
            expected = op(x, y, alpha).cpu()
            assert value.dtype == dtype and torch.equal(value.view(bits), expected.view(bits)), (name, alpha)
        if name + "@cpu" in results:
            expected = registry.get("axpy", device="cpu")(x.cpu(), y.cpu(), 1.5)
            assert torch.equal(results[name + "@cpu"].view(bits), expected.view(bits)), name


@pytest.fixture(scope="module")
def cpu_repo(tmp_path_factory, cache_root) -> Path:
    """axpy exported for the CPU through the CLI, into a repository folder with a file of its own."""
    repo = tmp_path_factory.mktemp("hub")
    (repo / "README.md").write_text("the repository's own file\n")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["aot", "axpy", "--hf-kernels", str(repo), "--backend", "cpu", "--license", "Apache-2.0"]) == 0
    assert f"wrote {repo / 'build' / hf_export.variant_name('cpu')}" in printed.getvalue()
    assert "get_local_kernel(pathlib.Path(" in printed.getvalue() and "backend='cpu')" in printed.getvalue()
    return repo


@pytest.mark.slow
def test_cpu_variant_loads_offline_with_kernels_and_matches_the_registry_bit_for_bit(cpu_repo, tmp_path):
    from kernels._rust import Backend, Metadata

    variant = cpu_repo / "build" / hf_export.variant_name("cpu")
    assert sorted(p.name for p in variant.iterdir()) == ["_C.so", "_C_cpu.so", "__init__.py", "metadata.json"]
    metadata = Metadata.read_from_file(variant / "metadata.json")  # the kernels package's own parser
    assert (str(metadata.name), metadata.version, metadata.license) == ("axpy", 1, "Apache-2.0")
    assert metadata.backend.backend_type == Backend.CPU and metadata.id.startswith("_axpy_cpu_")
    assert (cpu_repo / "README.md").read_text() == "the repository's own file\n"  # only build/<variant> is written
    # The variant's name carries no Python version: its libraries need no libpython and, of
    # Python's C API, only what the stable ABI has (the unused PyInit's PyModule_Create2).
    from registry.builder import elf

    for library in ("_C.so", "_C_cpu.so"):
        assert not [n for n in elf.needed_libraries(str(variant / library)) if n.startswith("libpython")], library
        undefined = subprocess.run(["nm", "-D", "--undefined-only", str(variant / library)], check=True,
                                   capture_output=True, text=True).stdout.split()
        assert {s for s in undefined if s.startswith(("Py", "_Py"))} <= {"PyModule_Create2"}, library

    results, chosen = _load_fresh(cpu_repo, "cpu", "cpu", tmp_path)
    assert chosen == variant.name
    _assert_bitwise_like_the_registry(results, "cpu")


# Runs in the fresh interpreter: torch already has axpy::axpy (as the registry's
# torch-library op makes it) when the variant is loaded.
CLASH = """
import sys
from pathlib import Path

import kernels
import torch

library = torch.library.Library("axpy", "FRAGMENT")
library.define("axpy(Tensor x, Tensor y, float alpha) -> Tensor")
try:
    kernels.get_local_kernel(Path(sys.argv[1]), backend="cpu")
    raise AssertionError("loaded over an op torch already had")
except ImportError as error:
    assert "torch.ops.axpy already has axpy in this process" in str(error), error
print("HF-OK")
"""


@pytest.mark.slow
def test_loading_over_an_op_torch_already_has_is_an_import_error_not_an_abort(cpu_repo, tmp_path):
    env = offline_hub_env(tmp_path)  # offline, an empty Hub cache, no JIT registry on the path
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(CLASH), str(cpu_repo)],
                            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0 and "HF-OK" in result.stdout, result.stdout + result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_variant_loads_offline_with_kernels_and_matches_the_registry_bit_for_bit(tmp_path, cache_root):
    from kernels._rust import Metadata

    repo = tmp_path / "hub"
    variants = hf_export.export_hf_kernel("axpy", repo, backends=["cpu", "cuda"])
    assert [v.name for v in variants] == [hf_export.variant_name("cpu"), hf_export.variant_name("cuda")]
    cuda = variants[1]
    assert {"_C.so", "_C_cpu.so", "_C_cuda.so"} <= {p.name for p in cuda.iterdir()}
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST") or "{}.{}".format(*torch.cuda.get_device_capability())
    assert Metadata.read_from_file(cuda / "metadata.json").backend.archs == re.split(r"[;\s]+", archs.strip())
    # No backend named: a CUDA torch picks the CUDA variant.
    results, chosen = _load_fresh(repo, None, "cuda", tmp_path)
    assert chosen == cuda.name
    _assert_bitwise_like_the_registry(results, "cuda")


def _toolkit() -> str | None:
    from registry.builder.cuda_home import toolkit_candidates

    found = [home for home in toolkit_candidates() if Path(home, "bin", "nvcc").is_file()]
    return found[0] if found and torch.version.cuda else None


@pytest.mark.slow
@pytest.mark.skipif(_toolkit() is None, reason="needs a CUDA torch and a CUDA toolkit (nvcc)")
def test_cuda_variant_builds_without_a_gpu_and_is_the_one_kernels_picks(tmp_path, cache_root, monkeypatch):
    """Build only (no GPU): the CUDA variant for TORCH_CUDA_ARCH_LIST's arch, picked by kernels under
    a CUDA torch, loads its CUDA kernels and keeps the CPU ones, bit for bit the registry's."""
    import torch.utils.cpp_extension  # noqa: F401  (its CUDA_HOME is taken now, before the one set below)
    from kernels._rust import Metadata

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setenv("CUDA_HOME", _toolkit())
    variants = hf_export.export_hf_kernel("axpy", tmp_path / "hub")
    assert [v.name for v in variants] == [hf_export.variant_name("cpu"), hf_export.variant_name("cuda")]
    cuda = variants[1]
    assert sorted(p.name for p in cuda.iterdir()) == ["_C.so", "_C_cpu.so", "_C_cuda.so", "__init__.py",
                                                      "metadata.json"]
    assert Metadata.read_from_file(cuda / "metadata.json").backend.archs == ["9.0"]
    results, chosen = _load_fresh(tmp_path / "hub", None, "cpu", tmp_path)
    assert chosen == cuda.name
    _assert_bitwise_like_the_registry(results, "cpu")


# Runs in the fresh interpreter: the manifest's backward, registered by the
# variant's own _autograd.py (a relative import inside the module kernels names).
GRADIENTS = """
import sys
from pathlib import Path

import kernels
import torch

kernel = kernels.get_local_kernel(Path(sys.argv[1]), backend="cpu")
gen = torch.Generator().manual_seed(0)
x = torch.randn(6, 64, generator=gen, requires_grad=True)
w = torch.randn(64, generator=gen, requires_grad=True)
g = torch.randn(6, 64, generator=gen)
(kernel.rmsnorm(x, w) * g).sum().backward()
xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
exact = torch.autograd.grad(xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * wd, (xd, wd), g.double())
for got, want in zip((x.grad, w.grad), exact):
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-5)
assert kernel.__name__ + "._autograd" in sys.modules
print("HF-OK")
"""


@pytest.mark.slow
def test_a_variant_carries_the_manifests_backward(tmp_path, cache_root):
    variant, = hf_export.export_hf_kernel("rmsnorm", tmp_path / "hub", backends=["cpu"])
    assert (variant / "_autograd.py").is_file()
    env = offline_hub_env(tmp_path)  # offline, an empty Hub cache, no JIT registry on the path
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(GRADIENTS), str(tmp_path / "hub")],
                            capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0 and "HF-OK" in result.stdout, result.stdout + result.stderr


@pytest.mark.slow
def test_a_failed_build_shows_the_compiler_and_writes_nothing(tmp_path, axpy_copy):
    axpy_copy.edit("axpy_cpu.cpp", '#include', '#error broken on purpose\n#include')
    with pytest.raises(RegistryError) as caught:
        hf_export.export_hf_kernel(axpy_copy.name, tmp_path / "hub", backends=["cpu"])
    message = str(caught.value)
    assert "building its package for the Hugging Face layout failed" in message, message
    assert "broken on purpose" in message and "--out DIR" in message, message
    # At the kernel's own file, not at the package's copy of it (gone with the staging folder).
    assert f"{axpy_copy.dir.resolve()}/axpy_cpu.cpp:3:" in message, message
    assert not (tmp_path / "hub" / "build").exists() or not any((tmp_path / "hub" / "build").iterdir())


# ---- without a build (fast) -----------------------------------------------------


def test_variant_names_are_the_ones_kernels_accepts_for_this_torch():
    from kernels.variants import ArchVariant, Torch, TorchStableAbi, parse_variant, resolve_variants

    major, minor = torch.__version__.split(".")[:2]
    cpu = hf_export.variant_name("cpu")
    assert cpu == f"torch{major}{minor}-cxx11-cpu-{platform.machine()}-linux"
    parsed = parse_variant(cpu)
    assert isinstance(parsed, ArchVariant) and isinstance(parsed.framework, Torch)
    assert resolve_variants([parsed], "cpu")[0] == [parsed]
    # The stable ABI's spelling, for when the package's binding is the stable one: accepted by this torch.
    stable = hf_export.variant_name("cpu", stable_abi=(2, 11))
    assert stable == f"torch-stable-abi211-cpu-{platform.machine()}-linux"
    assert isinstance(parse_variant(stable).framework, TorchStableAbi)
    assert resolve_variants([parse_variant(stable)], "cpu")[0] == [parse_variant(stable)]
    assert hf_export.variant_name("cpu", stable_abi=None) == cpu  # today's binding: STABLE_ABI_TARGET is None
    if torch.version.cuda:
        cuda = hf_export.variant_name("cuda")
        assert cuda == f"torch{major}{minor}-cxx11-cu{''.join(torch.version.cuda.split('.')[:2])}-" \
                      f"{platform.machine()}-linux"
        assert resolve_variants([parse_variant(cuda)], "cuda")[0] == [parse_variant(cuda)]


def test_hub_names_are_dashed_and_a_name_kernels_refuses_says_what_to_rename():
    from kernels._rust import KernelName

    assert hf_export.hub_name("lab_02_axpy") == "lab-02-axpy"
    assert KernelName(hf_export.hub_name("lab_02_axpy")).python_name == "lab_02_axpy"
    for bad in ("_axpy", "axpy_", "a", "2axpy"):
        with pytest.raises(RegistryError, match=re.escape('give the kernel such a name (name = "..."')):
            hf_export.hub_name(bad)


def test_a_foreign_variant_folder_is_refused_before_anything_is_built(tmp_path, monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("built before refusing")

    monkeypatch.setattr(hf_export.aot, "export_package", no_build)
    monkeypatch.setattr(hf_export, "_build", no_build)
    foreign = tmp_path / "hub" / "build" / hf_export.variant_name("cpu")
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text("# mine\n")
    with pytest.raises(RegistryError, match="not a variant the registry exported; move it away"):
        hf_export.export_hf_kernel("axpy", tmp_path / "hub", backends=["cpu"])
    assert (foreign / "__init__.py").read_text() == "# mine\n"
    # One this registry wrote may be replaced.
    (foreign / "__init__.py").write_text(hf_export.MARKER + " from axpy's kernel.toml\n")
    assert hf_export._replaceable(foreign) == foreign


@pytest.mark.skipif(torch.cuda.is_available() or bool(os.environ.get("TORCH_CUDA_ARCH_LIST")),
                    reason="CUDA can be built here")
def test_a_cuda_variant_that_cannot_be_built_here_is_refused_or_left_out_saying_why(tmp_path, monkeypatch,
                                                                                   cache_root):
    from registry.errors import BuildEnvironmentError
    from registry.resolve import find

    # Why depends on the machine (a CPU torch, no nvcc, no GPU to choose the arch from): the message says it.
    problem = hf_export._cuda_archs(find("axpy"))[1]
    assert problem, "CUDA looks buildable here"
    built = []
    monkeypatch.setattr(hf_export, "_build", lambda manifest, source, site, archs, kept: built.append(archs) or site)
    monkeypatch.setattr(hf_export, "_write_variant", lambda *args: None)
    with pytest.raises(BuildEnvironmentError, match="its CUDA variant cannot be built here: " + re.escape(problem)):
        hf_export.export_hf_kernel("axpy", tmp_path / "hub", backends=["cuda"])
    assert built == []
    with pytest.warns(RuntimeWarning, match="exporting without the CUDA variant, which cannot be built here: "
                                            + re.escape(problem)):
        variants = hf_export.export_hf_kernel("axpy", tmp_path / "hub")
    assert [v.name for v in variants] == [hf_export.variant_name("cpu")] and built == [None]


def test_aot_without_a_destination_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["aot", "axpy"])
    assert exit.value.code == 2 and "--hf-kernels DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["aot", "axpy", "--out", "x", "--license", "MIT"])
    assert "--license is for --hf-kernels" in capsys.readouterr().err

