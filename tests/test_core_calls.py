"""How often `get` crosses into the C++ core: the core plans a get in one
call and records it in one, so the counts stay small (bench/core_calls.py
measures the same from an empty cache and commits the figures)."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib

from conftest import CHECKOUT, KernelCopy
from reliability_helpers import binding_seed, child_env, private_cache, private_kernels  # noqa: F401 (fixtures)

CHILD = r"""
import collections, json, sys, threading
import torch
import registry
from registry import _core

counts = collections.Counter()

def hook(frame, event, arg):
    # The cache cap's worker runs after the get has its result (cache_cap.py).
    if event == "c_call" and not threading.current_thread().name.startswith("kreg-cache-cap"):
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
print(json.dumps({"first": first, "hot": hot, "outcome": outcome,
                  "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("registry", "pandas")),
                  "on_demand_registered": "generate_shared_binding" in vars(_core)}))
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
    assert sum(cold["first"].values()) <= 10, sorted(cold["first"].items())
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


# What a fresh process's cached get may import: the resolve path and the
# loading of a cached kernel. Anything else (the build machinery, tools, the
# notebook layer, the remote cache) costs start-up time that torch's load()
# does not pay, and must load on first use instead.
# Each module costs a fresh process ~0.1-0.2 ms of import machinery plus
# reading its code, so errors (imported where raised), the dtype table and
# keys.py (the core fills launcher tables and decides how a backend is built),
# and torch_ops (a binding's fake is made on its first trace) are not on this
# list, and the public functions live in the package itself.
CACHED_GET_MODULES = {
    "registry", "registry._core", "registry.environment", "registry.resolve", "registry.load",
    "registry.knobs", "registry.op", "registry.state",
}


def test_a_cached_get_loads_only_what_it_needs(private_cache, private_kernels):
    KernelCopy(private_kernels, "axpy", "axpy_lean")
    env = child_env(private_cache, private_kernels)
    _get("axpy_lean", env)  # builds
    cached = _get("axpy_lean", env)
    assert cached["outcome"] == "cache", cached
    assert set(cached["modules"]) <= CACHED_GET_MODULES, sorted(set(cached["modules"]) - CACHED_GET_MODULES)
    # The core registers the bindings no cached get uses on first access (module.cc).
    assert not cached["on_demand_registered"]


def test_the_core_registers_the_rest_on_first_use():
    from registry import _core

    assert callable(_core.generate_shared_binding) and "generate_shared_binding" in vars(_core)
    assert _core.LAUNCHER_HEADER_VERSION >= 1 and callable(_core.FileLock.try_acquire)
    try:
        _core.no_such_name
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError("a missing name must raise AttributeError")


# A fresh process: nothing registered on demand yet, when the checks start.
MEMBERS_CHILD = r"""
import sys
import registry
from registry import _core

manifest = _core.find_kernel("axpy", [sys.argv[1]])
assert "generate_shared_binding" not in vars(_core)
# A deferred member of an object made before the rest was registered.
assert manifest.description == "out = alpha * x + y", manifest.description
assert "generate_shared_binding" in vars(_core)
assert [a.type_text for a in manifest.ops[0].signature.args] == ["Tensor", "Tensor", "float"]
try:
    manifest.no_such_member
except AttributeError as error:
    assert "no_such_member" in str(error), error
else:
    raise AssertionError("a missing member must raise AttributeError")
print("ok")
"""

ENTRY_CHILD = r"""
from registry import _core

entry = _core.Entry()  # Python sets its fields: the rest is registered first
entry.kernel, entry.build_seconds = "axpy", 1.5
memo = _core.Memo()
memo.keys = {"lib": "0" * 32}
assert (entry.kernel, entry.build_seconds, memo.keys) == ("axpy", 1.5, {"lib": "0" * 32})
print("ok")
"""


def test_a_class_registers_its_deferred_members_on_first_use():
    for child in (MEMBERS_CHILD, ENTRY_CHILD):
        done = subprocess.run([sys.executable, "-c", child, str(CHECKOUT / "kernels")], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
