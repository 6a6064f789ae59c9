"""How often `get` crosses into the C++ core: the core plans a get in one
call and records it in one, so the counts stay small (bench/core_calls.py
measures the same from an empty cache and commits the figures)."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib

from conftest import KernelCopy
from reliability_helpers import binding_seed, child_env, private_cache, private_kernels  # noqa: F401 (fixtures)

CHILD = r"""
import collections, json, sys, threading
import torch
import registry
from registry import _core

counts = collections.Counter()

def hook(frame, event, arg):
    if event == "c_call":
        owner = getattr(arg, "__self__", None)
        if getattr(arg, "__module__", None) == "registry._core" or owner is _core \
                or (owner is not None and type(owner).__module__ == "registry._core"):
            counts[getattr(arg, "__name__", "?")] += 1

def counted(fn):
    counts.clear()
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return dict(counts)

name = sys.argv[1]
first = counted(lambda: registry.get(name, device="cpu"))
outcome = registry.status(name, device="cpu").outcome
hot = counted(lambda: registry.get(name, device="cpu"))
print(json.dumps({"first": first, "hot": hot, "outcome": outcome}))
"""


def _get(name: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, name], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_get_crosses_into_the_core_a_few_times(private_cache, private_kernels):
    KernelCopy(private_kernels, "axpy", "axpy_calls")
    env = child_env(private_cache, private_kernels)
    cold = _get("axpy_calls", env)  # the binding is seeded: this builds the kernel library
    assert cold["outcome"] == "compiled", cold
    assert sum(cold["first"].values()) <= 10, cold["first"]
    cached = _get("axpy_calls", env)
    assert cached["outcome"] == "cache", cached
    assert sum(cached["first"].values()) <= 5, cached["first"]
    assert cached["hot"] == {"unchanged": 1}, cached["hot"]


def test_the_memo_keeps_only_the_keys_it_reads(private_cache, private_kernels):
    KernelCopy(private_kernels, "axpy", "axpy_memo")
    env = child_env(private_cache, private_kernels)
    _get("axpy_memo", env)
    memos = list((private_cache / "v1" / "memo").glob("axpy_memo.cpu.*.toml"))
    assert len(memos) == 1, memos
    assert sorted(tomllib.loads(memos[0].read_text())["keys"]) == ["lib"]
