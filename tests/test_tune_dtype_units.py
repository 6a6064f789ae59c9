"""registry.tune builds, per config, only the units of the dtypes it tunes
where a kernel has one unit per dtype (named like its launcher: pair_f64.cpp
defines pair_f64), as kernels/gemm does for its CUTLASS instantiations
(core/dtype_units.h). Here the float64 unit compiles only in the default
config: a tune of float32 that compiled it for another config would drop
that config with a build error."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import registry
from registry import _core

_counter = itertools.count()

MANIFEST = """\
format = 1
reference = "reference.py"
cflags = ["-O2"]

[cpu]
sources = ["pair_f32.cpp", "pair_f64.cpp"]

[[op]]
signature = "pair(Tensor x) -> (Tensor y, Tensor tag)"
dtypes = ["float32", "float64"]
outputs = { y = "like x", tag = "int64[x.shape[:-1]]" }
sweep = { x = "[rows, cols]" }

[tune]
params = { V = [0, 1] }
"""

UNIT = r"""// pair: y = 2 x; tag[r] = V, the config that ran. V = 0 waits 2 ms a call.
#include <time.h>

#include "kreg/cpu.h"

#ifndef V
#define V 0
#endif
{guard}
KREG_API const char* pair_{suffix}(kreg_tensor y, kreg_tensor tag, kreg_tensor x, void*) {{
  if (V == 0) {{
    timespec wait{{0, 2000000}};
    nanosleep(&wait, nullptr);
  }}
  const int64_t rows = kreg::row_count(x), cols = kreg::row_length(x);
  const {t}* xs = static_cast<const {t}*>(x.data);
  {t}* ys = static_cast<{t}*>(y.data);
  for (int64_t i = 0; i < rows * cols; ++i) ys[i] = 2 * xs[i];
  for (int64_t r = 0; r < rows; ++r) static_cast<int64_t*>(tag.data)[r] = V;
  return nullptr;
}}
"""

REFERENCE = """\
import torch

TOLERANCES = {"pair": {"int64": (0.0, 1e9)}}


def pair(x):
    return 2 * x, torch.zeros(x.shape[:-1], dtype=torch.int64)
"""

SHAPE = (64, 32)


def write_pair(root, name):
    folder = root / name
    folder.mkdir()
    (folder / "kernel.toml").write_text(MANIFEST)
    (folder / "pair_f32.cpp").write_text(UNIT.format(suffix="f32", t="float", guard=""))
    guard = '#if V != 0\n#error "only the default config compiles the float64 unit"\n#endif'
    (folder / "pair_f64.cpp").write_text(UNIT.format(suffix="f64", t="double", guard=guard))
    (folder / "reference.py").write_text(REFERENCE)
    return folder


@pytest.fixture(scope="module")
def tuned(kernels_root, cache_root):
    name = f"pair_t{next(_counter)}"
    write_pair(kernels_root, name)
    result = registry.tune(name, shapes=[SHAPE], dtypes=["float32"], device="cpu", repeats=5)
    return name, result


def test_a_float32_tune_builds_no_float64_unit(tuned):
    name, result = tuned
    assert result.dropped == [], result.dropped  # V=1 built without pair_f64.cpp
    assert result.winners == {("pair", "float32", "64x32"): "V=1"}, result.table
    op = registry.get(name, device="cpu")
    _, tag = op(torch.randn(SHAPE))
    assert int(tag[0]) == 1  # the winner runs float32 at the tuned shape
    y, tag = op(torch.randn(SHAPE, dtype=torch.float64))
    assert int(tag[0]) == 0 and y.dtype == torch.float64  # float64: the default config's whole library


def test_the_one_dtype_build_has_its_own_key_and_drops_only_the_other_units(tuned, kernels_root):
    name, _ = tuned
    manifest = _core.parse_manifest(str(kernels_root / name / "kernel.toml"))
    other = _core.with_config(manifest, [("V", 1)])
    f32 = _core.with_dtypes(other, "cpu", ["float32"])
    assert list(f32.cpu.sources) == ["pair_f32.cpp"] and list(f32.ops[0].dtypes) == ["float32"]
    assert list(f32.dtype_subset) == ["pair:float32"]
    both = _core.with_dtypes(other, "cpu", ["float32", "float64"])
    assert list(both.cpu.sources) == list(other.cpu.sources) and not both.dtype_subset
    from registry.builder import keys

    files = [str(kernels_root / name / "pair_f32.cpp")]
    key_of = lambda m: _core.kernel_lib_key(m, "cpu", {"env.x": "1"}, files, str(keys.REGISTRY_INCLUDE)).hex
    assert key_of(f32) != key_of(other)  # the same files: the subset alone tells them apart
    from registry.builder import recipe

    f64 = _core.with_dtypes(other, "cpu", ["float64"])
    names = {recipe._config_suffix(m) for m in (other, f32, f64)}
    assert len(names) == 3  # each built side by side under its own load() name


def test_a_fresh_process_loads_the_one_dtype_winner_without_compiling(tuned, cache_root, kernels_root):
    name, _ = tuned
    script = textwrap.dedent(f"""
        import torch, registry
        from registry.builder import step
        op = registry.get({name!r}, device="cpu")
        print(int(op(torch.randn{SHAPE!r})[1][0]), len(step.builds_run))
    """)
    env = dict(os.environ, REGISTRY_CACHE_DIR=str(cache_root), REGISTRY_KERNELS_PATH=str(kernels_root))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["1", "0"], out.stdout
