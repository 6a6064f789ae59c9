"""registry.tune on the CPU backend, with a probe kernel written here: its
configs differ in speed by the shape (BLOCK=1 is fast for few rows, BLOCK=8
for many), one computes wrong (BAD=1), one's launcher returns an error
(FAULT=1) and one writes far past the end of its output (FAULT=2: a real
SIGSEGV, which the check's isolated worker turns into a dropped config while
this process goes on); all of those are the fastest of all, so only the
check keeps them out. Every config writes its number into the `tag` output,
so which config ran a call is visible.
"""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import registry
from redis_server import redis_server  # noqa: F401 (fixture)
from registry import _core

_counter = itertools.count()

MANIFEST = """\
format = 1
reference = "reference.py"
cflags = ["-O2"]

[cpu]
sources = ["probe.cpp"]

[[op]]
signature = "probe(Tensor x) -> (Tensor y, Tensor tag)"
outputs = { y = "like x", tag = "int64[x.shape[:-1]]" }
sweep = { x = "[rows, cols]" }

[tune]
params = { BLOCK = [1, 8], BAD = [0, 1], FAULT = [0, 1, 2] }
rule = "BAD == 0 || FAULT == 0"
"""

SOURCE = r"""// probe: y = 2 x; tag[r] = 10 * BLOCK + BAD, the config that ran.
#include <time.h>

#include "kreg/cpu.h"

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef BAD
#define BAD 0
#endif
#ifndef FAULT
#define FAULT 0
#endif

KREG_API const char* probe_f32(kreg_tensor y, kreg_tensor tag, kreg_tensor x, void*) {
  if (FAULT == 1) return "probe: this config faults";
  const int64_t rows = kreg::row_count(x), cols = kreg::row_length(x);
  if (FAULT == 2) static_cast<volatile float*>(y.data)[rows * cols + (int64_t(1) << 40)] = 1.0f;  // SIGSEGV
  // BLOCK=1 suits few rows, BLOCK=8 many: the other one waits 2 ms.
  const int preferred = rows < 64 ? 1 : 8;
  if (!BAD && BLOCK != preferred) {
    timespec wait{0, 2000000};
    nanosleep(&wait, nullptr);
  }
  const float* xs = static_cast<const float*>(x.data);
  float* ys = static_cast<float*>(y.data);
  int64_t* tags = static_cast<int64_t*>(tag.data);
  for (int64_t i = 0; i < rows * cols; ++i) ys[i] = 2.0f * xs[i] + (BAD ? 0.5f : 0.0f);
  for (int64_t r = 0; r < rows; ++r) tags[r] = 10 * BLOCK + BAD;
  return nullptr;
}
"""

REFERENCE = """\
import torch

# The tag says which config ran; it has no reference value.
TOLERANCES = {"probe": {"int64": (0.0, 1e9)}}


def probe(x):
    return 2 * x, torch.zeros(x.shape[:-1], dtype=torch.int64)
"""

FEW, MANY = (16, 32), (256, 32)


def write_probe(root, name):
    folder = root / name
    folder.mkdir()
    (folder / "kernel.toml").write_text(MANIFEST)
    (folder / "probe.cpp").write_text(SOURCE)
    (folder / "reference.py").write_text(REFERENCE)
    return folder


def tag_of(op, shape) -> int:
    _, tag = op(torch.randn(shape))
    return int(tag[0])


@pytest.fixture(scope="module")
def tuned(kernels_root, cache_root):
    name = f"probe_t{next(_counter)}"
    folder = write_probe(kernels_root, name)
    result = registry.tune(name, shapes=[FEW, MANY], device="cpu", repeats=5)
    return name, folder, result


def test_wrong_and_faulting_configs_are_dropped_and_never_chosen(tuned):
    name, _, result = tuned
    # The BAD configs never wait: they would be the fastest everywhere if they were timed.
    assert set(result.winners.values()) <= {"BAD=0,BLOCK=1,FAULT=0", "BAD=0,BLOCK=8,FAULT=0"}, result.winners
    dropped = "\n".join(result.dropped)
    assert "BAD=1,BLOCK=1,FAULT=0: wrong: y:" in dropped, dropped
    assert "BAD=0,BLOCK=8,FAULT=1: fault: " in dropped and "probe: this config faults" in dropped, dropped
    for block in (1, 8):  # the crash: a KernelFault in the worker, reported; this process goes on
        assert f"BAD=0,BLOCK={block},FAULT=2: fault in the isolated worker: " in dropped, dropped
    assert "SIGSEGV" in dropped, dropped
    assert result.winners[("probe", "float32", "16x32")] == "BAD=0,BLOCK=1,FAULT=0"
    assert result.winners[("probe", "float32", "256x32")] == "BAD=0,BLOCK=8,FAULT=0"
    table = result.table
    assert not table[table["config"].str.contains("BAD=1|FAULT=1|FAULT=2")]["chosen"].any()
    assert table[table["config"].str.contains("BAD=1")]["median_us"].isna().all()  # dropped before timing
    many = table[(table["shape"] == "256x32") & table["chosen"].astype(bool)]
    assert float(many["speedup"].iloc[0]) > 2, many  # 2 ms of waiting saved
    assert "tune" in repr(result) and "<table" in result._repr_html_()
    assert result.plot() is not None


def test_the_tuned_op_dispatches_to_the_winner_of_each_shape_bucket(tuned):
    name, _, _ = tuned
    op = registry.get(name, device="cpu")
    assert tag_of(op, MANY) == 80
    assert tag_of(op, FEW) == 10
    assert tag_of(op, (200, 30)) == 80   # bucket 256x32
    assert tag_of(op, (12, 20)) == 10    # bucket 16x32
    assert tag_of(op, (1024, 32)) == 10  # not tuned: the default config (BLOCK=1)
    status = registry.status(name, device="cpu")
    assert status.tuned.startswith("in use: "), status.tuned
    assert "probe float32 256x32: BAD=0,BLOCK=8,FAULT=0" in str(status)


def _first_lines_in_a_fresh_process(script: str, cache_root, kernels_root) -> list[str]:
    """The first two lines `script` prints in a new Python process on this
    test's cache and kernels (and no remote cache)."""
    env = dict(os.environ, REGISTRY_CACHE_DIR=str(cache_root), REGISTRY_KERNELS_PATH=str(kernels_root))
    env.pop("REGISTRY_REMOTE_CACHE", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()[:2]
    assert len(lines) == 2, out.stdout
    return lines


def test_the_table_survives_a_fresh_process(tuned, cache_root, kernels_root):
    name, _, _ = tuned
    script = textwrap.dedent(f"""
        import torch, registry
        op = registry.get({name!r}, device="cpu")
        print(int(op(torch.randn(256, 32))[1][0]), int(op(torch.randn(16, 32))[1][0]))
        print(registry.status({name!r}, device="cpu").tuned)
    """)
    first, second = _first_lines_in_a_fresh_process(script, cache_root, kernels_root)
    assert first == "80 10"
    assert second.startswith("in use: "), second


def test_an_edit_makes_the_table_stale_and_the_default_runs(tuned):
    name, folder, _ = tuned
    source = folder / "probe.cpp"
    source.write_text(source.read_text() + "// an edit\n")
    op = registry.get(name, device="cpu")
    status = registry.status(name, device="cpu")
    assert status.tuned.startswith("stale: tuned for other code"), status.tuned
    assert tag_of(op, MANY) == 10  # the default config, not the winner measured on other code


def test_a_manifest_without_a_config_space_is_refused(kernels_root):
    from registry.errors import UsageError

    name = f"probe_t{next(_counter)}"
    folder = write_probe(kernels_root, name)
    (folder / "kernel.toml").write_text(MANIFEST.split("[tune]")[0])
    with pytest.raises(UsageError, match=r"has no config space: add a \[tune\] table"):
        registry.tune(name, device="cpu")


def test_configs_have_their_own_keys_and_the_default_is_a_plain_get(kernels_root):
    name = f"probe_t{next(_counter)}"
    write_probe(kernels_root, name)
    manifest = _core.parse_manifest(str(kernels_root / name / "kernel.toml"))
    assert _core.config_label(manifest.config) == "BAD=0,BLOCK=1,FAULT=0"
    assert manifest.cflags[-3:] == ["-DBAD=0", "-DBLOCK=1", "-DFAULT=0"]
    assert len(manifest.tune.enumerate()) == 8  # 12, less the four the rule rejects (BAD=1 with FAULT=1 or 2)
    other = _core.with_config(manifest, [("BLOCK", 8), ("BAD", 0), ("FAULT", 0)])
    from registry.builder import keys

    files = [str(kernels_root / name / "probe.cpp")]
    key_of = lambda m: _core.kernel_lib_key(m, "cpu", {"env.x": "1"}, files, str(keys.REGISTRY_INCLUDE)).hex
    assert key_of(other) != key_of(manifest)
    assert key_of(_core.with_config(manifest, manifest.config)) == key_of(manifest)


def test_tuning_again_what_the_table_covers_measures_nothing(tuned):
    name, _, _ = tuned
    # (run after the edit test: the kernel is another version now, so tune it first)
    first = registry.tune(name, shapes=[FEW], device="cpu", repeats=3)
    assert first.compiled >= 0 and len(first.table) > 1
    again = registry.tune(name, shapes=[FEW], device="cpu")
    assert len(again.table) == 1 and again.table["note"].iloc[0].startswith("cached"), again.table
    assert again.winners == first.winners
    assert again.seconds < 0.1, again.seconds
    assert len(registry.tune(name, shapes=[FEW], device="cpu", repeats=3, force=True).table) > 1


def test_the_magic_tunes_and_returns_the_result(tuned, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    name, _, _ = tuned
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "registry.magics")
    try:
        result = shell.run_line_magic("registry", f"tune {name} --shapes 16x32 --device cpu")
        assert result.winners == {("probe", "float32", "16x32"): "BAD=0,BLOCK=1,FAULT=0"}, result
        shell.run_line_magic("registry", "tune")
        assert "tune NAME [--shapes" in capsys.readouterr().out
    finally:
        shell.run_line_magic("unload_ext", "registry.magics")


def test_a_teammate_uses_the_tuned_table_through_the_team_cache_with_no_compile(tmp_path, redis_server):
    """Alice tunes with the team cache set; Bob, with an empty cache of his
    own, gets the kernel: the libraries and the table come from the Redis."""
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    name = f"probe_team{next(_counter)}"
    write_probe(kernels, name)
    common = {**os.environ, "REGISTRY_KERNELS_PATH": str(kernels), "REGISTRY_REMOTE_CACHE": redis_server.url,
              "REGISTRY_REMOTE_TIMEOUT": "2", "REGISTRY_DEVICE": "cpu"}
    alice = textwrap.dedent(f"""
        import registry
        result = registry.tune({name!r}, shapes=[{MANY!r}], device="cpu", repeats=3)
        print(result.winners)
    """)
    bob = textwrap.dedent(f"""
        import torch, registry
        from registry.builder import step as builder
        op = registry.get({name!r}, device="cpu")
        print(int(op(torch.randn(*{MANY!r}))[1][0]), len(builder.builds_run))
        print(registry.status({name!r}, device="cpu").tuned)
    """)
    for script, cache in ((alice, tmp_path / "alice"), (bob, tmp_path / "bob")):
        out = subprocess.run([sys.executable, "-c", script], env={**common, "REGISTRY_CACHE_DIR": str(cache)},
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
    tag, builds = out.stdout.splitlines()[0].split()
    assert (tag, builds) == ("80", "0"), out.stdout  # the winner runs, nothing compiled on Bob's machine
    assert out.stdout.splitlines()[1].startswith("in use: "), out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_library_row_kernel_tunes_on_cuda_and_runs_its_winners(kernels_root):
    from conftest import KernelCopy

    copy = KernelCopy(kernels_root, "rowmax", f"rowmax_t{next(_counter)}")
    shapes = [(4096, 256), (65536, 1024)]
    result = registry.tune(copy.name, shapes=shapes, device="cuda", repeats=10)
    assert not result.dropped, result.dropped
    assert result.table["config"].nunique() == 24
    table = result.table
    for shape in ("4096x256", "65536x1024"):
        chosen = table[(table["shape"] == shape) & table["chosen"].astype(bool)]
        assert len(chosen) == 1 and float(chosen["speedup"].iloc[0]) >= 1.0, table[table["shape"] == shape]
    status = registry.status(copy.name, device="cuda")
    assert status.tuned.startswith("in use: "), status.tuned
    op = registry.get(copy.name, device="cuda")
    routed = sum(config != "KREG_ROW_BLOCK_THREADS=128,KREG_ROW_PACKS=4" for config in result.winners.values())
    assert op._table.route_count == routed
    for shape in shapes:  # the winners compute what torch does
        x = torch.randn(*shape, device="cuda")
        values, indices = op(x)
        expected = torch.max(x, dim=-1)
        assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)


def test_a_cached_get_of_a_never_tuned_kernel_imports_no_tuning_code(kernels_root, cache_root):
    name = f"probe_t{next(_counter)}"
    write_probe(kernels_root, name)
    registry.get(name, device="cpu")  # built and cached
    script = textwrap.dedent(f"""
        import sys, registry
        registry.get({name!r}, device="cpu")
        print(sorted(m for m in sys.modules if m.startswith("registry.notebook")))
        print(registry.status({name!r}, device="cpu").tuned)
    """)
    modules, line = _first_lines_in_a_fresh_process(script, cache_root, kernels_root)
    assert modules == "[]"
    assert line.startswith("not tuned"), line


def test_builds_with_the_same_compiler_settings_share_the_environment_and_others_wait(tmp_path):
    """registry.tune's configs build side by side: the compiler environment
    (builder/ccache.py) is shared by builds that need the same settings; one
    that needs others waits until it is free, and it is restored after."""
    import threading
    import time

    from registry.builder import ccache

    seen, lock = [], threading.Lock()

    def build(arch: str) -> None:
        with ccache.compiler_environment(tmp_path, arch):
            start = time.perf_counter()
            with lock:
                seen.append((arch, os.environ.get("TORCH_CUDA_ARCH_LIST"), os.environ.get("CXX"), start))
            time.sleep(0.3)
            with lock:
                seen.append((arch, os.environ.get("TORCH_CUDA_ARCH_LIST"), os.environ.get("CXX"), time.perf_counter()))

    before = os.environ.get("TORCH_CUDA_ARCH_LIST")
    t0 = time.perf_counter()
    threads = [threading.Thread(target=build, args=("9.0",)) for _ in range(4)] + [threading.Thread(target=build, args=("8.0",))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    assert all(arch == seen_arch for arch, seen_arch, _, _ in seen), seen  # each build saw its own settings
    assert len({cxx for arch, _, cxx, _ in seen if arch == "9.0"}) == 1
    assert elapsed < 4 * 0.3, elapsed  # the four 9.0 builds overlapped (serialized: 1.5 s in all)
    assert elapsed >= 2 * 0.3 - 0.05  # the 8.0 one ran alone, before or after them
    assert os.environ.get("TORCH_CUDA_ARCH_LIST") == before


TWO_OPS = """\
format = 1
reference = "reference.py"
cflags = ["-O2"]

[cpu]
sources = ["probe.cpp", "axpy.cpp"]

[[op]]
signature = "probe(Tensor x) -> (Tensor y, Tensor tag)"
outputs = { y = "like x", tag = "int64[x.shape[:-1]]" }
sweep = { x = "[rows, cols]" }
tune = ["BLOCK"]

[[op]]
signature = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"
tune = ["UNROLL"]

[tune]
params = { BLOCK = [1, 8], UNROLL = [1, 2, 4] }
"""

AXPY_SOURCE = r"""// out = alpha * x + y, UNROLL elements a step (the tail one at a time).
#include "kreg/cpu.h"

#ifndef UNROLL
#define UNROLL 1
#endif

KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void*) {
  const float* xs = static_cast<const float*>(x.data);
  const float* ys = static_cast<const float*>(y.data);
  float* os = static_cast<float*>(out.data);
  int64_t i = 0;
  for (; i + UNROLL <= x.numel; i += UNROLL)
    for (int u = 0; u < UNROLL; ++u) os[i + u] = alpha * xs[i + u] + ys[i + u];
  for (; i < x.numel; ++i) os[i] = alpha * xs[i] + ys[i];
  return nullptr;
}
"""


def test_each_op_is_tried_only_with_the_parameters_it_reads(kernels_root):
    name = f"probe_ops{next(_counter)}"
    folder = write_probe(kernels_root, name)
    (folder / "kernel.toml").write_text(TWO_OPS)
    (folder / "axpy.cpp").write_text(AXPY_SOURCE)
    (folder / "reference.py").write_text(REFERENCE + "\n\ndef axpy(x, y, alpha):\n    return alpha * x + y\n")
    result = registry.tune(name, shapes=[FEW], device="cpu", repeats=3, keep=False)
    table = result.table
    tried = {op: set(table[table["op"] == op]["config"]) for op in ("probe", "axpy")}
    assert tried["probe"] == {"BLOCK=1,UNROLL=1", "BLOCK=8,UNROLL=1"}, tried
    assert tried["axpy"] == {"BLOCK=1,UNROLL=1", "BLOCK=1,UNROLL=2", "BLOCK=1,UNROLL=4"}, tried
    assert table["passed"].all(), table
    # 4 builds (the sum of the two spaces, sharing the default), not the product's 6.
    assert len(tried["probe"] | tried["axpy"]) == 4
    from registry.errors import UsageError

    with pytest.raises(UsageError, match="has no op .nope."):
        registry.tune(name, shapes=[FEW], device="cpu", ops=["nope"])


def test_a_config_must_beat_the_default_in_every_round_to_be_chosen():
    """At a few microseconds one round's noise can make a median gain: a
    winner must be faster than the default in each final round (the rounds
    are pairs, each round's level divided out), and by MIN_GAIN in the median."""
    from registry.tuning.search import beats

    default = {"median_us": 10.0, "round_us": [10.0, 10.1, 9.9, 10.2]}
    steady = {"median_us": 9.5, "round_us": [9.5, 9.6, 9.4, 9.7]}
    lucky = {"median_us": 9.5, "round_us": [9.5, 9.4, 10.3, 9.6]}  # slower than the default in round 3
    close = {"median_us": 9.95, "round_us": [9.95] * 4}  # faster every round, by less than MIN_GAIN
    assert beats(steady, default)
    assert not beats(lucky, default)
    assert not beats(close, default)
    assert not beats(default, default)
    # Faster in each round, 3 % in the median, though the default's fastest
    # round (9.6) is faster than this one's slowest: the rounds are compared
    # pair by pair, not range against range.
    noisy_default = {"median_us": 10.0, "round_us": [10.0, 9.6, 10.0, 10.1]}
    assert beats({"median_us": 9.7, "round_us": [9.7, 9.5, 9.7, 9.8]}, noisy_default)
    # A round where the default was faster (9.6 against 9.7) is a round lost.
    assert not beats({"median_us": 9.7, "round_us": [9.7, 9.7, 9.7, 9.8]}, noisy_default)
    assert beats({"median_us": 9.0}, {"median_us": 10.0})  # not in the final round: the medians decide


def test_a_shape_names_every_sweep_size_where_the_first_tensor_does_not(tmp_path):
    """A GEMM's sweep (a = "[m, k]", b = "[k, n]"): n is not in a's shape, so
    a shape gives all three, in the order the sweep first names them; a
    shape of the first Tensor still works where it names every size."""
    from registry.errors import UsageError
    from registry.tuning.search import shape_for

    checkout_matmul = Path(registry.__file__).resolve().parent.parent / "kernels" / "matmul"
    plain = _core.parse_manifest(str(checkout_matmul / "kernel.toml")).ops[0]  # a = "[rows, cols]", b = "[cols, 64]"
    assert shape_for(plain, (128, 32)) == {"a": (128, 32), "b": (32, 64)}
    shutil.copytree(checkout_matmul, tmp_path / "mm3")
    toml = tmp_path / "mm3" / "kernel.toml"
    toml.write_text(toml.read_text().replace('sweep = { a = "[rows, cols]", b = "[cols, 64]" }',
                                             'sweep = { a = "[m, k]", b = "[k, n]" }'))
    spec = _core.parse_manifest(str(toml)).ops[0]
    assert shape_for(spec, (16384, 4096, 1024)) == {"a": (16384, 4096), "b": (4096, 1024)}
    with pytest.raises(UsageError, match="leaves n unset"):
        shape_for(spec, (16384, 4096))
    with pytest.raises(UsageError, match="not 4"):
        shape_for(spec, (1, 2, 3, 4))


def test_tune_leaves_no_isolated_worker_of_its_own_running(tuned):
    # The checks run configs in an isolated worker; after the tune the process
    # is as it was: no worker of the tune's left (on CUDA: no second context
    # on the GPU mapping the tune's tensors). A worker the user's own isolated
    # op started before the tune is not stopped by it (the crashing config
    # here ends it, as any crash would: the user's next call starts another).
    from registry.isolation.supervisor import SUPERVISOR

    name, _, _ = tuned
    mine = registry.get(name, device="cpu", isolate=True)
    mine(torch.randn(FEW))
    users = {id(w) for w in SUPERVISOR.workers.values()}
    started = SUPERVISOR.started
    processes = []
    original = SUPERVISOR.worker

    def tracked(*args, **kwargs):
        count = SUPERVISOR.started
        worker = original(*args, **kwargs)
        if SUPERVISOR.started > count:  # started now, by the tune
            processes.append(worker.process)
        return worker

    SUPERVISOR.worker = tracked
    try:
        registry.tune(name, shapes=[FEW], device="cpu", repeats=3, force=True, keep=False)
    finally:
        del SUPERVISOR.worker
    assert SUPERVISOR.started > started, "the tune's checks ran in no isolated worker"
    assert {id(w) for w in SUPERVISOR.workers.values()} <= users, "a worker the tune started is still running"
    assert processes and all(p.poll() is not None for p in processes), "a tune's worker process lives"
    assert torch.equal(mine(torch.randn(FEW))[1], mine(torch.randn(FEW))[1])  # the user's op still runs
