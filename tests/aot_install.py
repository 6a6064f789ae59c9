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


def run_installed(target: Path, script: str, *args: str, cwd: Path) -> None:
    """Runs `script` with the install folder and what PYTHONPATH adds (a GPU
    machine's carried packages) on the path, not the checkout; it must print AOT-OK."""
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) != CHECKOUT]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), *kept]))
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600,
                            env=env, cwd=cwd)
    assert result.returncode == 0 and "AOT-OK" in result.stdout, result.stdout + result.stderr
