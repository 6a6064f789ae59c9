"""registry.sweep: every dtype and size checked against the float64 reference, timed."""
from __future__ import annotations

import pytest
import torch

import registry
from registry.notebook.checks import TOLERANCES, compare
from registry.notebook.dtype_sweep import COLUMNS

SMALL = [1, 17, 4096]


def test_table_has_the_columns_and_axpy_passes_on_cpu(axpy_copy):
    result = registry.sweep(axpy_copy.name, sizes=SMALL, device="cpu", repeats=3)
    table = result.table
    assert list(table.columns) == [c for c in COLUMNS if c != "fraction_of_copy"]  # no copy baseline on CPU
    assert sorted(table["dtype"].unique()) == sorted(["float32", "float16", "bfloat16"])
    assert sorted(table["n"].unique()) == SMALL
    assert result.passed, table.to_string()
    assert (table["median_ms"] > 0).all() and (table["gbps"] > 0).all()
    for dtype, (rtol, atol) in TOLERANCES.items():
        rows = table[table["dtype"] == dtype]
        assert (rows["rtol"] == rtol).all() and (rows["atol"] == atol).all()


def test_html_repr_and_plots(axpy_copy):
    from matplotlib.figure import Figure

    result = registry.sweep(axpy_copy.name, sizes=[17, 4096], dtypes=["float32"], device="cpu", repeats=2)
    html = result._repr_html_()
    assert "<table" in html and f"kernel {axpy_copy.name} on cpu" in html and torch.__version__ in html
    for metric in ("gbps", "ms"):
        fig = result.plot(metric)
        assert isinstance(fig, Figure)
        assert fig.axes[0].get_xscale() == "log"
        assert [line.get_label() for line in fig.axes[0].get_lines()] == ["float32"]
    with pytest.raises(ValueError, match="'gbps' or 'ms'"):
        result.plot("flops")


def test_sizes_over_the_memory_budget_are_skipped_with_the_reason(axpy_copy):
    result = registry.sweep(axpy_copy.name, sizes=[17, 1 << 20], dtypes=["float32"], device="cpu",
                            memory_budget=1 << 20, repeats=2)
    skipped = result.table[result.table["n"] == 1 << 20].iloc[0]
    assert skipped["note"].startswith("skipped: needs") and "memory_budget=" in skipped["note"]
    assert skipped["passed"] is None
    assert result.passed  # the row that ran passed


def test_a_broken_kernel_fails_the_check(axpy_copy):
    # A bias of 0.25 is outside every dtype's tolerance (bfloat16: 0.008 + 0.008 |ref|) for |ref| < 30.
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 0.25f")
    result = registry.sweep(axpy_copy.name, sizes=[17, 4096], device="cpu", repeats=1)
    assert not result.passed
    assert not result.table["passed"].any()
    assert result.table["note"].str.contains("out of tolerance").all()


def test_scalar_arguments_can_be_set(axpy_copy):
    result = registry.sweep(axpy_copy.name, sizes=[17], dtypes=["float32"], device="cpu", repeats=1,
                            args={"alpha": -3.0})
    assert result.passed


@pytest.mark.parametrize("kernel, scalars", [("softmax", {"temperature": 0.1}), ("rmsnorm", {"eps": 0.1})])
def test_float64_ops_get_their_float_scalars_as_double(kernels_root, kernel, scalars):
    # 0.1 narrowed to C float is off by 1.5e-9 relative: outside float64's 1e-12
    # tolerance. A float64 launcher receives a `float` argument as double.
    from conftest import KernelCopy, _counter

    copy = KernelCopy(kernels_root, kernel, f"{kernel}_t{next(_counter)}")
    result = registry.sweep(copy.name, sizes=[17, 4096], dtypes=["float64"], device="cpu", repeats=1,
                            args=scalars, ops=[kernel])
    assert len(result.table) == 2
    assert result.passed, result.table.to_string()


def test_a_float64_launcher_written_to_the_prototype_passes_the_sweep(axpy_copy):
    axpy_copy.edit("kernel.toml", 'dtypes = ["float32", "float16", "bfloat16"]',
                   'dtypes = ["float32", "float16", "bfloat16", "float64"]')
    axpy_copy.path("axpy_cpu.cpp").write_text(axpy_copy.path("axpy_cpu.cpp").read_text() + (
        "KREG_API const char* axpy_f64(kreg_tensor out, kreg_tensor x, kreg_tensor y, double alpha, void*) {\n"
        "  for (int64_t i = 0; i < out.numel; ++i)\n"
        "    static_cast<double*>(out.data)[i] = alpha * static_cast<const double*>(x.data)[i]"
        " + static_cast<const double*>(y.data)[i];\n"
        "  return nullptr;\n}\n"))
    result = registry.sweep(axpy_copy.name, sizes=[17, 4096], device="cpu", repeats=1, args={"alpha": 0.1})
    assert sorted(result.table["dtype"].unique()) == ["bfloat16", "float16", "float32", "float64"]
    assert result.passed, result.table.to_string()
    # The dispatcher's path (no fast entry) narrows and widens by the same rule.
    op = registry.get(axpy_copy.name, device="cpu")
    x, y = torch.randn(33, dtype=torch.float64), torch.randn(33, dtype=torch.float64)
    torch.testing.assert_close(op._call_raw((x, y, 0.1)), 0.1 * x + y, rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(op(x.float(), y.float(), 0.1), (0.1 * x + y).float())


def test_all_zero_output_fails_even_within_tolerance():
    ref = torch.full((64,), 1e-7, dtype=torch.float64)  # |ref| below float32's atol
    check = compare(torch.zeros(64), ref, *TOLERANCES["float32"])
    assert not check.passed and "all zeros" in check.reason


def test_nan_or_inf_where_the_reference_is_finite_fails():
    ref = torch.randn(32, dtype=torch.float64)
    out = ref.float()
    out[3] = float("nan")
    check = compare(out, ref, *TOLERANCES["float32"])
    assert not check.passed and "NaN/inf" in check.reason
    out[3] = float("inf")
    assert not compare(out, ref, *TOLERANCES["float32"]).passed


def test_tolerance_scales_with_magnitude():
    ref = torch.tensor([1e6, -2e6, 0.5], dtype=torch.float64)
    out = (ref * (1 + 5e-6)).float()  # abs error ~5 at 1e6, but relative 5e-6 < rtol 1e-5
    check = compare(out, ref, *TOLERANCES["float32"])
    assert check.passed and check.max_abs_err > 1
    assert not compare((ref * (1 + 5e-5)).float(), ref, *TOLERANCES["float32"]).passed


def test_half_precision_rounding_passes_and_one_ulp_more_fails():
    torch.manual_seed(0)
    ref = torch.randn(1000, dtype=torch.float64) * 10
    assert compare(ref.half(), ref, *TOLERANCES["float16"]).passed          # correctly rounded
    assert compare(ref.bfloat16(), ref, *TOLERANCES["bfloat16"]).passed
    assert not compare((ref * 1.01).half(), ref, *TOLERANCES["float16"]).passed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_sweep_reports_fraction_of_copy():
    result = registry.sweep("axpy", sizes=[1, 17, 1 << 16, 1 << 24], device="cuda", repeats=5)
    assert result.passed, result.table.to_string()
    assert "fraction_of_copy" in result.table.columns
    assert result.copy_gbps > 0
    big = result.table[result.table["n"] == 1 << 24]
    assert (big["fraction_of_copy"] > 0).all()


def test_a_dtype_the_op_does_not_list_is_skipped_and_an_unknown_one_refused(axpy_copy):
    result = registry.sweep(axpy_copy.name, sizes=[17], dtypes=["float32", "float64"], device="cpu", repeats=1)
    row = result.table[result.table["dtype"] == "float64"].iloc[0]
    assert row["passed"] is None and "lists only float32, float16, bfloat16" in row["note"]
    assert result.passed
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        registry.sweep(axpy_copy.name, sizes=[17], dtypes=["float8"], device="cpu")


def test_any_dtype_of_the_table_is_known_to_the_sweep(axpy_copy):
    """The sweep knows dtypes from the one table (core/dtype.h), not from its
    tolerances: an integer dtype the op does not list is a skipped row."""
    result = registry.sweep(axpy_copy.name, sizes=[17], dtypes=["float32", "int32"], device="cpu", repeats=1)
    row = result.table[result.table["dtype"] == "int32"].iloc[0]
    assert row["passed"] is None and "lists only float32, float16, bfloat16" in row["note"]
    with pytest.raises(registry.RegistryError, match="unknown dtype 'int'; choose from float32, float16, bfloat16, "
                                                     "float64, int8"):
        registry.sweep(axpy_copy.name, sizes=[17], dtypes=["int"], device="cpu")


def test_a_handle_without_a_reference_says_to_pass_one(axpy_copy):
    axpy_copy.edit("kernel.toml", 'reference = "reference.py"', "")
    op = registry.get(axpy_copy.name, device="cpu")
    with pytest.raises(registry.RegistryError, match=r"axpy_t\d+\.axpy: no reference to check against: pass registry.sweep\(\.\.\., reference=") as info:
        registry.sweep(op, sizes=[17], dtypes=["float32"], repeats=1)
    assert not isinstance(info.value, AttributeError)


def test_each_row_shows_the_tolerance_of_the_output_that_decided_it(kernels_root):
    # Indices one off: the int64 output fails, and its exact tolerance (0, 0) decided the row,
    # not the float16 dispatch dtype's (1e-3, 1e-3).
    from conftest import KernelCopy, _counter

    copy = KernelCopy(kernels_root, "rowmax", f"rowmax_t{next(_counter)}")
    copy.edit("rowmax_cpu.cpp", "static_cast<int64_t*>(indices.data)[r] = at;",
              "static_cast<int64_t*>(indices.data)[r] = at + 1;")
    result = registry.sweep(copy.name, sizes=[17], dtypes=["float16"], device="cpu", repeats=1)
    row = result.table.iloc[0]
    assert not row["passed"] and row["note"].startswith("indices:")
    assert (row["rtol"], row["atol"], row["decided_by"]) == (0.0, 0.0, "indices")
    assert row["max_abs_err"] == 1.0


def test_a_passing_row_shows_the_tolerance_of_its_tightest_output():
    from registry.notebook.checks import check_call

    class Spec:  # two outputs: y within a fifth of float16's tolerance, mean at half of float32's
        name = "two"
        signature = type("S", (), {"returns": [type("R", (), {"name": n}) for n in ("y", "mean")], "args": []})

    def op():
        return torch.ones(8, dtype=torch.float16), torch.full((8,), 1.0 + 0.5 * 1.1e-5, dtype=torch.float32)

    result = check_call(op, Spec, lambda: (torch.full((8,), 1.0004, dtype=torch.float64),
                                           torch.ones(8, dtype=torch.float64)), [])
    assert result.passed and result.output == "mean" and (result.rtol, result.atol) == TOLERANCES["float32"]
