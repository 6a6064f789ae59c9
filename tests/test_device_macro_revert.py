"""A header the device source names through a macro (`#include BIAS_HEADER`)
is invisible to the include scan: the compiler reports it, and the cubin's
key covers it through the dependency record, as the kernel library's does.
So editing it rebuilds, and reverting it is answered from the cache on both
device paths (NVRTC and nvcc -cubin), with no compile. Without a GPU: the
arch comes from the helpers' ARCH."""
from __future__ import annotations

import pytest

from pathlib import Path

from device_build_helpers import NVCC, PATHS, build, copy_example, make_store
from registry.device import cubin_build as device_build

MACRO_INCLUDE = '#define AXPY_BIAS_HEADER "bias.h"\n#include AXPY_BIAS_HEADER\n'


@pytest.mark.parametrize("compiler", PATHS)
def test_reverting_a_macro_included_header_compiles_nothing(tmp_path, monkeypatch, compiler):
    store = make_store(tmp_path, monkeypatch)
    kernel = copy_example(tmp_path / "kernels", compiler)
    bias = kernel.path("bias.h")
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 0.0f\n")
    kernel.edit("axpy_device.cu", '#include "axpy_math.h"\n', '#include "axpy_math.h"\n' + MACRO_INCLUDE)
    compiles = device_build.compiles_run

    first = build(kernel, store)
    assert first.built is not None and str(bias) in first.files, first.files
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 1.0f\n")
    start = len(compiles)
    edited = build(kernel, store, first)
    assert edited.built is not None and edited.key != first.key and len(compiles) > start
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 0.0f\n")
    start = len(compiles)
    reverted = build(kernel, store, edited)
    assert compiles[start:] == [], f"reverting {bias.name} compiled the cubin {len(compiles) - start} time(s)"
    assert reverted.built is None and reverted.key == first.key
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 1.0f\n")
    start = len(compiles)
    forward = build(kernel, store, reverted)  # and the edit again: its cubin too
    assert compiles[start:] == [] and forward.key == edited.key



GET_SCRIPT = r"""
import json, os, sys
from pathlib import Path
import registry
from registry.device import cubin_build, driver_module
driver_module.bind = lambda library, key, path: None  # no GPU here: the module is not loaded
out = {}
for name in sys.argv[1:]:
    bias = Path(os.environ["REGISTRY_KERNELS_PATH"]) / name / "bias.h"
    steps = []
    for value in ("0.0f", "1.0f", "0.0f", "1.0f"):  # first, edit, revert, edit again
        bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS " + value + "\n")
        start = len(cubin_build.compiles_run)
        registry.get(name, device="cuda")
        steps.append([len(cubin_build.compiles_run) - start,
                      registry.status(name, device="cuda").artifacts["device code (cubin)"]])
    out[name] = steps
print(json.dumps(out))
"""


def test_through_get_a_revert_is_a_cache_hit_on_both_paths(tmp_path):
    """The same edit, revert and edit again through registry.get (the memo, the
    plan, the claim), in one fresh process without a GPU (TORCH_CUDA_ARCH_LIST)."""
    import json
    import os
    import subprocess
    import sys

    from conftest import CHECKOUT

    names = []
    for compiler in ["nvrtc"] + (["nvcc-cubin"] if Path(NVCC).is_file() else []):
        kernel = copy_example(tmp_path / "kernels", compiler)
        kernel.edit("axpy_device.cu", '#include "axpy_math.h"\n', '#include "axpy_math.h"\n' + MACRO_INCLUDE)
        names.append(kernel.name)
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "TORCH_CUDA_ARCH_LIST": "9.0",
           "REGISTRY_KERNELS_PATH": str(tmp_path / "kernels"), "REGISTRY_CACHE_DIR": str(tmp_path / "cache"),
           "CCACHE_DIR": str(tmp_path / "ccache")}
    if "CUDA_HOME" not in env and os.path.isfile("/usr/local/cuda/bin/nvcc"):
        env["CUDA_HOME"] = "/usr/local/cuda"  # the binding links the CUDA runtime from there
    done = subprocess.run([sys.executable, "-c", GET_SCRIPT, *names], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    for name, steps in json.loads(done.stdout.strip().splitlines()[-1]).items():
        (first, first_cubin), (edit, edit_cubin), (revert, revert_cubin), (again, again_cubin) = steps
        assert first >= 1 and edit >= 1 and edit_cubin != first_cubin, (name, steps)
        assert revert == 0 and revert_cubin == first_cubin, (name, "the revert compiled", steps)
        assert again == 0 and again_cubin == edit_cubin, (name, steps)


@pytest.mark.gpu
@pytest.mark.parametrize("compiler", PATHS)
def test_on_a_gpu_a_revert_gives_the_old_result_with_no_compile(kernels_root, compiler):
    import torch

    import registry
    from conftest import _counter

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    kernel = copy_example(kernels_root, compiler, f"_mr{next(_counter)}")
    bias = kernel.path("bias.h")
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 0.0f\n")
    kernel.edit("axpy_math.h", '#include "axpy_nvrtc/config.h"\n', '#include "axpy_nvrtc/config.h"\n' + MACRO_INCLUDE)
    kernel.edit("axpy_math.h", "return alpha * x + y + AXPY_BIAS;", "return alpha * x + y + AXPY_BIAS + AXPY_MACRO_BIAS;")

    def value():
        x = torch.zeros(4096, device="cuda")
        out = registry.get(kernel.name, device="cuda")(x, x, 1.0)
        torch.cuda.synchronize()
        return float(out[0])

    assert value() == 0.0
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 1.0f\n")
    assert value() == 1.0
    bias.write_text("#pragma once\n#define AXPY_MACRO_BIAS 0.0f\n")
    start = len(device_build.compiles_run)
    assert value() == 0.0
    assert device_build.compiles_run[start:] == [], "the revert compiled the cubin again"
