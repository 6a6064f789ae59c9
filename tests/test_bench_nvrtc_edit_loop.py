"""bench/nvrtc_edit_loop.py reports each step as it completes (a run cut short,
or one that takes minutes, still shows what it measured) and takes
--torch-reps apart from --reps (torch's builds are 20-40 s each). Runs the
CPU variant with one edit per step (~15 s on 2 cores)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import CHECKOUT


def test_each_step_is_printed_before_the_summary(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, str(CHECKOUT / "bench" / "nvrtc_edit_loop.py"), "--device", "cpu",
                           "--reps", "1", "--torch-reps", "0", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    summary = lines.index("# NVRTC edit loop (cpu)")
    steps = [line for line in lines[:summary] if line.startswith("step ")]
    names = [line.split(":")[0].removeprefix("step ") for line in steps]
    assert {"cold_cubin", "device_edit", "header_edit", "floors"} <= set(names), steps
    assert any(line.startswith("step device_edit: ") and "stale 0" in line for line in steps), steps
    nvcc = Path("/usr/local/cuda/bin/nvcc").exists() or any(
        Path(d, "nvcc").exists() for d in os.environ.get("PATH", "").split(os.pathsep) if d)
    if nvcc:  # the nvcc -cubin path beside NVRTC
        assert {"cubin_device_edit", "cubin_header_edit"} <= set(names), steps
    assert (tmp_path / "nvrtc_edit_loop-cpu.md").is_file()
