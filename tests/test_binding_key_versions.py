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


def test_a_binding_that_needs_a_newer_runtime_says_to_rebuild_it_here():
    """Its key leaves out the compiler, so a teammate's binding may need a newer
    libstdc++ than this process has: the load error says what to do."""
    from registry.errors import BuildEnvironmentError
    from registry.load import binding_load_error

    error = OSError("/c/kreg_binding_cpu_1.so: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not "
                    "found (required by /c/kreg_binding_cpu_1.so)")
    raised = binding_load_error(error, "/c/kreg_binding_cpu_1.so")
    assert isinstance(raised, BuildEnvironmentError)
    assert "GLIBCXX_3.4.32" in str(raised) and "rebuild=True" in str(raised) and "--rebuild" in str(raised)
    other = OSError("/c/kreg_binding_cpu_1.so: cannot open shared object file: No such file or directory")
    assert binding_load_error(other, "/c/kreg_binding_cpu_1.so") is other
