"""Racy stamps: on a filesystem whose times tick coarsely, a same-size edit
within the tick of the stamp keeps size, inode and mtime. `get` in a fresh
process (the memo's stamps, not the in-process change watch) must still see
it: a stamp whose mtime is not older than its own recording by a tick is
re-hashed (core/file_stamp.h)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CHECKOUT

pytestmark = pytest.mark.usefixtures("cache_root")

CHILD = r"""
import os, sys, time
import torch
import registry
name, config, pin = sys.argv[1], sys.argv[2], sys.argv[3]
if pin == "now":  # what a whole-second filesystem records for a write in this second
    mtime = int(time.time()) * 10**9
    os.utime(config, ns=(mtime, mtime))
    print("mtime", mtime)
op = registry.get(name, device="cpu")
x = torch.zeros(4)
print("bias", float(op(x, x, 1.0)[0]))
"""


def _child(copy, config, pin: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "REGISTRY_DEVICE": "cpu"}
    done = subprocess.run([sys.executable, "-c", CHILD, copy.name, str(config), pin], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


def test_a_same_size_edit_within_one_coarse_tick_is_seen_by_a_fresh_get(axpy_copy):
    config = axpy_copy.path("include/axpy/config.h")
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f")
    first = _child(axpy_copy, config, "now")
    assert float(first["bias"]) == 1.0
    mtime = int(first["mtime"])
    before = os.stat(config)
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 1.0f", "#define AXPY_BIAS 2.0f")
    os.utime(config, ns=(mtime, mtime))  # the same tick: nothing in the stat tells the edit apart
    after = os.stat(config)
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (before.st_size, before.st_ino, before.st_mtime_ns)
    assert float(_child(axpy_copy, config, "keep")["bias"]) == 2.0
