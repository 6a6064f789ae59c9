"""An AOT package installed as a user installs it, and a script run against
that install alone (the GPU tests of packages that carry device code)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = os.path.realpath(Path(__file__).resolve().parent.parent)


def pip_install(package: Path, target: Path) -> None:
    """pip builds and installs `package` into `target` against this torch
    (--no-build-isolation), downloading nothing; KREG_AOT_CUDA=1 makes a
    missing nvcc fail the build instead of leaving the CUDA module out."""
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                             "--no-index", "--target", str(target), str(package)],
                            capture_output=True, text=True, timeout=900, env={**os.environ, "KREG_AOT_CUDA": "1"})
    assert result.returncode == 0, f"pip failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"


def pythonpath_without_checkout() -> list[str]:
    """What PYTHONPATH adds (a GPU machine's carried packages) but the checkout:
    a package under test must not find the JIT registry."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) != CHECKOUT]


def offline_hub_env(tmp_path: Path) -> dict:
    """The environment of a fresh interpreter that loads a Hugging Face layout
    export: offline, an empty Hub cache, PYTHONPATH without the checkout."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath_without_checkout()), HF_HUB_OFFLINE="1",
                HF_HOME=str(tmp_path / "hf-home"))


def run_installed(target: Path, script: str, *args: str, cwd: Path) -> None:
    """Runs `script` with the install folder and what PYTHONPATH adds (a GPU
    machine's carried packages) on the path, not the checkout; it must print AOT-OK."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), *pythonpath_without_checkout()]))
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600,
                            env=env, cwd=cwd)
    assert result.returncode == 0 and "AOT-OK" in result.stdout, result.stdout + result.stderr
