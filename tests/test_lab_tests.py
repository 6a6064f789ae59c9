"""registry.testing.lab_tests: the lab's required pytest in one line. A lab's
test file holding only that line is collected over the manifest's dtypes x
the seed's sizes, passes for a correct kernel and fails for a wrong one."""
from __future__ import annotations

import pytest
import torch

pytest_plugins = ["pytester"]

LAB_TEST = """
from registry.testing import lab_tests
test_numerics, test_overhead = lab_tests({name!r}, device="cpu")
"""


def _run_lab_test(pytester, name: str, *args: str):
    pytester.makepyfile(test_lab=LAB_TEST.format(name=name))
    # A process of its own, as a lab runs it (and an in-process run would drop registry's modules after it).
    return pytester.runpytest_subprocess("-p", "registry.testing", "-p", "no:cacheprovider", *args)


@pytest.mark.slow
def test_one_line_gives_numerics_over_dtypes_and_sizes(pytester, axpy_copy):
    collected = _run_lab_test(pytester, axpy_copy.name, "--collect-only", "-q")
    ids = [line.split("::", 1)[1] for line in collected.outlines if "::" in line]
    sizes = ["n1", "n17", "n65536", "n4194304-scaled-from-n268435456"]  # 2^28 scaled down on the CPU
    assert ids == [f"test_numerics[{dtype}-{n}]" for dtype in ("float32", "float16", "bfloat16") for n in sizes] + \
        [f"test_overhead[{dtype}-n4194304-scaled-from-n268435456]" for dtype in ("float32", "float16", "bfloat16")]

    scaled = _run_lab_test(pytester, axpy_copy.name, "--collect-only", "-q", "-m", "scaled and not benchmark")
    assert [line for line in scaled.outlines if "::" in line] == \
        [f"test_lab.py::test_numerics[{dtype}-{sizes[-1]}]" for dtype in ("float32", "float16", "bfloat16")]

    ran = _run_lab_test(pytester, axpy_copy.name, "-m", "not benchmark")
    ran.assert_outcomes(passed=12, deselected=3)


@pytest.mark.slow
def test_a_wrong_kernel_fails_every_case(pytester, axpy_copy):
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 0.25f")
    ran = _run_lab_test(pytester, axpy_copy.name, "-m", "not benchmark", "-k", "n1 or n17")
    ran.assert_outcomes(failed=6, deselected=9)
    assert "elements out of tolerance" in ran.stdout.str()
    assert f"{axpy_copy.name}.axpy float16 n=17 (x[17] y[17]) on cpu" in ran.stdout.str()


def test_several_outputs_optional_tensors_scalars_and_sweep_shapes(kernels_root):
    # layernorm: x [rows, cols], weight and bias [cols] (bias a Tensor?), float eps; y, mean and rstd.
    from conftest import KernelCopy

    from registry.testing import lab_tests

    copy = KernelCopy(kernels_root, "layernorm", "layernorm_lab")
    test_numerics, _ = lab_tests(copy.name, device="cpu", sizes=[17])
    test_numerics(op_name="layernorm", dtype="float32", n=17)
    copy.edit("reference.py", "torch.rsqrt(var + eps)", "torch.rsqrt(var + eps * 1e6)")  # the reference disagrees now: the same case must fail
    with pytest.raises(AssertionError, match=r"layernorm float32 n=17 \(x\[17, 33\] weight\[33\] bias\[33\]\)"):
        test_numerics(op_name="layernorm", dtype="float32", n=17)


@pytest.mark.slow
@pytest.mark.parametrize("kernel,op_name,dtype", [
    ("axpy", "axpy", "float16"),
    ("rmsnorm", "rmsnorm", "float64"),  # a float64 launcher takes its float argument as double
    ("rowmax", "rowmax", "float32"),    # an int64 output beside the values
    ("scale", "scale_", "bfloat16"),    # in place: no return, the argument written
])
def test_the_overhead_anchor_is_the_ops_own_launcher(kernels_root, kernel, op_name, dtype):
    """Not the timing assert (marked benchmark): what it compares, on a short
    run. measure_overhead first checks that the launcher called directly gives
    the op's result, so a wrong call of it fails here."""
    from registry.notebook.required_tests import measure_overhead

    timing = measure_overhead(kernel, op_name, dtype, 1 << 12, "cpu", rounds=3, calls=2)
    assert timing.op_ms > 0 and timing.launcher_ms > 0 and timing.rounds == 3
    assert "its launcher alone" in str(timing)


@pytest.mark.gpu
@pytest.mark.benchmark
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_lab_tests_on_cuda_at_the_seed_sizes(axpy_copy):
    from registry.testing import lab_tests

    test_numerics, test_overhead = lab_tests(axpy_copy.name, device="cuda")
    for dtype in ("float32", "float16", "bfloat16"):
        for n in (1, 17, 1 << 16, 1 << 28):
            test_numerics(op_name="axpy", dtype=dtype, n=n)
    test_overhead(op_name="axpy", dtype="float32", n=1 << 28)
