"""One shared binding for every torch and Python: on torch's stable ABI and
Python's limited API (core/stable_binding_text.h) its key holds the stable
target and the CUDA major, not torch's or Python's exact versions. So a
teammate on another torch or Python finds the binding already built, in the
team's cache as in a shared local one: the key is all a lookup compares.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import registry
from registry import environment, knobs
from registry.builder import keys
from registry.state import STATE
from reliability_helpers import binding_seed, private_cache  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("cache_root")

ANOTHER = {"env.torch": "2.11.0+cu130", "env.python": "3.12 cpython-312-x86_64-linux-gnu", "env.torch_cxx11_abi": "0"}
ANOTHER_COMPILER = {"toolchain.cxx": "/opt/gcc/bin/g++ | g++ (GCC) 13.3.0"}


def test_the_key_does_not_depend_on_torchs_pythons_or_the_compilers_version():
    env = environment.build_environment("cpu", knobs.cache_dir())
    assert env["env.torch"] != ANOTHER["env.torch"]
    here, there = keys.binding_key("cpu", env), keys.binding_key("cpu", {**env, **ANOTHER, **ANOTHER_COMPILER})
    assert here.hex == there.hex
    names = {i.name: i.value for i in here.inputs}
    assert names["stable_abi"].startswith("torch 2.11 and later") and "env.torch" not in names, names
    # One CUDA major serves its minors; another major is another binding.
    cuda = {**env, "env.cuda": "13.0"}
    assert keys.binding_key("cuda", cuda).hex == keys.binding_key("cuda", {**cuda, **ANOTHER, "env.cuda": "13.2"}).hex
    assert keys.binding_key("cuda", cuda).hex != keys.binding_key("cuda", {**cuda, "env.cuda": "12.8"}).hex


# A teammate's process: torch and Python report other versions to every key.
TEAMMATE = """
import json, sys
import registry
from registry import environment
from registry.builder import step
from registry.state import STATE

real = environment.build_environment
def another_torch(*args, **kwargs):
    return {**real(*args, **kwargs), **json.loads(sys.argv[1])}
environment.build_environment = another_torch

softmax = registry.get("softmax", device="cpu")
import torch
x = torch.randn(3, 5)
ok = bool(torch.allclose(softmax(x), torch.softmax(x, -1), atol=1e-6))
print(json.dumps({"builds": step.builds_run, "bindings": sorted(STATE.bindings), "ok": ok}))
"""


def test_a_teammate_on_another_torch_gets_the_same_binding_with_no_compile():
    registry.get("softmax", device="cpu")
    built = sorted(name for name in STATE.bindings if name.startswith("kreg_binding_cpu_"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", TEAMMATE, json.dumps(ANOTHER)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["builds"] == [] and result["ok"], result
    assert [name for name in result["bindings"] if name.startswith("kreg_binding_cpu_")] == built


# A fresh process whose loader refuses the cached binding once, as it refuses
# one that a newer g++ built (std::ios_base_library_init, GLIBCXX_3.4.32).
FOREIGN = """
import json, warnings
import torch, registry
from registry import load
from registry.builder import step

real, calls = load.SharedBinding.__init__, []
def needs_newer(self, path):
    calls.append(path)
    if len(calls) == 1:
        raise OSError(path + ": libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by " + path + ")")
    real(self, path)
load.SharedBinding.__init__ = needs_newer
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    op = registry.get("axpy", device="cpu")
x = torch.arange(5.0)
print(json.dumps({"builds": step.builds_run, "ok": bool(torch.equal(op(x, x, 2.0), 3 * x)), "loads": len(calls),
                  "warned": [str(w.message) for w in caught]}))
"""


def test_a_binding_another_machine_built_for_a_newer_runtime_is_built_here(private_cache):
    """Its key leaves out the compiler, so a teammate's binding may need a newer
    libstdc++ than this process has: the get removes it, builds it here and
    runs, with a warning that says so. In a cache of the test's own: the
    removal must not reach the session's, whose binding this process pins."""
    run = subprocess.run([sys.executable, "-c", FOREIGN], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "REGISTRY_CACHE_DIR": str(private_cache)})
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    # The private cache held the binding alone: axpy's library is built too, the binding once more.
    assert got["ok"] and got["loads"] == 2 and [kind for _, kind in got["builds"]].count("binding") == 1, got
    assert any("GLIBCXX_3.4.32" in w and "building it on this machine" in w for w in got["warned"]), got


def test_other_load_errors_are_the_loaders():
    from registry.load import BindingNeedsNewerRuntime, binding_load_error

    other = OSError("/c/kreg_binding_cpu_1.so: cannot open shared object file: No such file or directory")
    assert binding_load_error(other, "/c/kreg_binding_cpu_1.so") is other
    needs = binding_load_error(OSError("x.so: version `GLIBCXX_3.4.32' not found (required by x.so)"), "x.so")
    assert isinstance(needs, BindingNeedsNewerRuntime) and needs.missing == "GLIBCXX_3.4.32"
