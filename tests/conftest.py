"""Shared fixtures: a private cache and private copies of kernels to edit.

The cache is shared by the whole session so the binding for a signature is
compiled once (as it is for a user); each test edits its own copy of a
kernel, under its own name, so tests never see each other's builds.
"""
from __future__ import annotations

import itertools
import os
import shutil
import signal
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
_counter = itertools.count()

# The Ctrl-C tests send SIGINT to this process, as a terminal does to a
# notebook's kernel. A shell that starts a job in the background without job
# control (`cmd &` in a script) hands it SIGINT ignored, and Python then
# installs no KeyboardInterrupt handler: the signal would be lost and those
# calls would run to their timeout. Give the suite the interpreter's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory) -> Path:
    """REGISTRY_TEST_SEED_CACHE: a cache the session starts from (a copy),
    e.g. one holding a shared binding another machine built."""
    root = tmp_path_factory.mktemp("cache")
    seed = os.environ.get("REGISTRY_TEST_SEED_CACHE")
    if seed:
        shutil.copytree(seed, root, dirs_exist_ok=True)
    os.environ["REGISTRY_CACHE_DIR"] = str(root)
    return root


@pytest.fixture(scope="session")
def kernels_root(tmp_path_factory, cache_root) -> Path:
    root = tmp_path_factory.mktemp("kernels")
    os.environ["REGISTRY_KERNELS_PATH"] = str(root)
    return root


class KernelCopy:
    """A copy of a checkout kernel under a fresh name, with edit helpers."""

    def __init__(self, root: Path, source: str, name: str):
        self.name, self.dir = name, root / name
        shutil.copytree(CHECKOUT / "kernels" / source, self.dir)

    def path(self, relative: str) -> Path:
        return self.dir / relative

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.path(relative)
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new, 1))


@pytest.fixture
def axpy_copy(kernels_root) -> KernelCopy:
    return KernelCopy(kernels_root, "axpy", f"axpy_t{next(_counter)}")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def lib_axpy(request, axpy_copy) -> KernelCopy:
    """An axpy copy with binding = "torch-library" (torch.ops.<name>.axpy),
    built for the CPU and for CUDA in turn (`.device`)."""
    import torch

    import registry

    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    axpy_copy.edit("kernel.toml", "format = 1", 'format = 1\nbinding = "torch-library"')
    axpy_copy.device = request.param
    registry.get(axpy_copy.name, device=request.param)
    return axpy_copy


@pytest.fixture
def cuda_toolkit(monkeypatch) -> str:
    """nvcc, so a CUDA kernel library compiles through torch's load() with no
    GPU: for TORCH_CUDA_ARCH_LIST = 9.0. Skips where there is no toolkit."""
    from registry.builder.torch_extension import _import_cpp_extension

    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    if not (Path(home) / "bin" / "nvcc").exists():
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    # torch found its CUDA_HOME at import; make it and the registry agree on this one.
    monkeypatch.setenv("CUDA_HOME", home)
    monkeypatch.setattr(_import_cpp_extension(), "CUDA_HOME", home)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    return home


@pytest.fixture
def compiles():
    """The compiles run since the test started, as (kernel, kind) pairs."""
    from registry.builder import step

    start = len(step.builds_run)

    class Counter:
        def __call__(self, kernel: str | None = None) -> list[tuple[str, str]]:
            runs = step.builds_run[start:]
            return [r for r in runs if kernel is None or r[0] == kernel]

    return Counter()


def pytest_terminal_summary(terminalreporter):
    """Prints the figures tests measured (tests/figures.py): passing tests'
    output is otherwise hidden. With a seeded cache (REGISTRY_TEST_SEED_CACHE),
    also how many shared bindings the session compiled: 0 when the seed's
    served every test."""
    import sys

    figures = sys.modules.get("figures")
    if figures is not None and figures.FIGURES:
        terminalreporter.section("measured figures")
        for line in figures.FIGURES:
            terminalreporter.write_line(line)
    if os.environ.get("REGISTRY_TEST_SEED_CACHE"):
        from registry.builder import step

        bindings = [built for built in step.builds_run if built[1] == "binding"]
        terminalreporter.write_line(f"shared bindings compiled in this session: {len(bindings)} {bindings}")
