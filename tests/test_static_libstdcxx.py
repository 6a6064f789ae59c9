"""A compiler that links libstdc++ statically into shared modules.

Some toolchains (a GCC installed in its own prefix that finds only libstdc++.a
in its library folder) put a private copy of libstdc++ into every module they link.
Loaded beside torch, which runs with the shared one, the two copies' locale
state disagree and numbers stop formatting: the op's error "argument 'y' has
shape [9] ..." came out as "... has shape [" (and crashed on other machines).
Every build therefore links torch's libstdc++ by path. Here such a toolchain
is made from the system g++ and its libstdc++.a, and both build paths (JIT and
the AOT package) must give the full message.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_aot import _export_and_install, _run_fresh

CHECKOUT = Path(__file__).resolve().parent.parent


def _needs_libstdcxx(library: Path) -> bool:
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return "libstdc++.so" in dynamic


@pytest.fixture(scope="module")
def static_cxx(tmp_path_factory) -> str:
    """A g++ whose only libstdc++ is the static archive."""
    real = shutil.which("g++")
    if real is None or shutil.which("readelf") is None:
        pytest.skip("needs g++ and readelf")
    archive = subprocess.run([real, "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(archive):
        pytest.skip("this g++ has no libstdc++.a to build the toolchain from")
    root = tmp_path_factory.mktemp("static-gxx")
    (root / "lib").mkdir()
    (root / "lib" / "libstdc++.a").symlink_to(archive)
    cxx = root / "g++"
    cxx.write_text(f'#!/bin/sh\nexec {real} -B{root}/lib/ "$@"\n')
    cxx.chmod(0o755)

    # The toolchain must really link libstdc++ statically, or the tests below
    # would pass without showing anything.
    probe = root / "probe.cpp"
    probe.write_text('#include <sstream>\nstd::string f(long v) { std::ostringstream s; s << v; return s.str(); }\n')
    subprocess.run([str(cxx), "-shared", "-fPIC", str(probe), "-o", str(root / "probe.so")], check=True)
    assert not _needs_libstdcxx(root / "probe.so"), "the simulated toolchain linked the shared libstdc++"
    return str(cxx)


JIT_CHECK = """
import torch, registry
op = registry.get("axpy", device="cpu")
torch.testing.assert_close(op(torch.ones(8), torch.ones(8), 2.0), torch.full((8,), 3.0))
try:
    op(torch.randn(8), torch.randn(9), 1.0)
except RuntimeError as error:
    print(error)
"""


@pytest.mark.slow
def test_jit_modules_share_torchs_libstdcxx(static_cxx, tmp_path):
    env = {**os.environ, "CXX": static_cxx, "REGISTRY_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(CHECKOUT)}
    env.pop("REGISTRY_KERNELS_PATH", None)  # the checkout's axpy
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(JIT_CHECK)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "argument 'y' has shape [9] but 'x' has shape [8]" in done.stdout, done.stdout + done.stderr
    bindings = [so for so in (tmp_path / "cache").rglob("kreg_*.so") if "_axpy_" not in so.name]
    assert bindings and all(_needs_libstdcxx(so) for so in bindings)


@pytest.mark.slow
def test_aot_package_shares_torchs_libstdcxx(static_cxx, tmp_path):
    # Python's LDSHARED on many distributions carries -Bsymbolic-functions,
    # which binds a module to its private copy: the harder case.
    target = _export_and_install(tmp_path, ["cpu"], env={"CXX": static_cxx, "LDFLAGS": "-Wl,-Bsymbolic-functions"})
    modules = sorted((target / "axpy_ops").glob("*.so"))
    assert modules and all(_needs_libstdcxx(so) for so in modules)
    _run_fresh(target, "cpu", tmp_path)
