"""The register budget of the library's register-cached row kernels, read
from ptxas (-Xptxas -v) for sm_90: no CPU or GPU run needed, only nvcc.

A row cached in registers is only fast while enough threads stay resident:
bf16 rows once took twice the registers of f16 rows (61 against 32 for
softmax at 4096 columns, the halves of each 32-bit word split into registers
of their own) and ran at 0.77-0.89 of a device copy against f16's 0.91-0.97
on an H200. kreg::acc_at widens bf16 pairs from their word instead.
"""
from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import CHECKOUT
from test_kernel_library import NVCC

ROW_KERNELS = ["softmax", "rmsnorm", "layernorm", "rowmax", "quantize"]
# Mangled template arguments: element type, pack width N, packs a thread P.
TYPES = {"float": "f", "half": "6__half", "bfloat16": "13__nv_bfloat16"}
_ENTRY = re.compile(r"Compiling entry function '(\S+)' for")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def _ptxas_report(kernel: str, tmp_path: Path) -> dict[str, tuple[int, int]]:
    """Kernel (mangled name) -> (registers, spilled bytes) as ptxas reports them."""
    source = CHECKOUT / "kernels" / kernel / f"{kernel}.cu"
    command = [NVCC, "-arch=sm_90", "-std=c++17", "-O3", "-cubin", "-Xptxas", "-v",
               "-I", str(CHECKOUT / "registry" / "include"),
               "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
               str(source), "-o", str(tmp_path / f"{kernel}.cubin")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report, name, spilled = {}, None, 0
    for line in done.stderr.splitlines():
        if (m := _ENTRY.search(line)):
            name, spilled = m.group(1), 0
        elif (m := _SPILL.search(line)):
            spilled = int(m.group(1)) + int(m.group(2))
        elif (m := _REGS.search(line)) and name:
            report[name] = (int(m.group(1)), spilled)
    return report


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    if NVCC is None:
        pytest.skip("needs nvcc")
    folder = tmp_path_factory.mktemp("ptxas")
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(ROW_KERNELS, pool.map(lambda k: _ptxas_report(k, folder), ROW_KERNELS)))


def _cached(report: dict, kernel: str, dtype: str, n: int, p: int) -> tuple[int, int]:
    pattern = re.compile(rf"{kernel}_cachedI{TYPES[dtype]}Li{n}ELi{p}E")
    found = [v for name, v in report.items() if pattern.search(name)]
    assert len(found) == 1, f"{kernel}_cached<{dtype}, {n}, {p}>: {len(found)} matches"
    return found[0]


@pytest.mark.parametrize("kernel", ROW_KERNELS)
def test_packed_rows_never_spill(reports, kernel):
    """Every 16-byte-pack instantiation (1, 2, 4, 8 packs a thread) keeps its row in registers."""
    spills = []
    for dtype, n in (("float", 4), ("half", 8), ("bfloat16", 8)):
        for p in (1, 2, 4, 8):
            regs, spilled = _cached(reports[kernel], kernel, dtype, n, p)
            if spilled:
                spills.append(f"<{dtype}, {n}, {p}>: {spilled} bytes spilled ({regs} registers)")
    assert not spills, f"{kernel}_cached spills: " + "; ".join(spills)


@pytest.mark.parametrize("kernel", ROW_KERNELS)
def test_bfloat16_rows_take_no_more_registers_than_float16(reports, kernel):
    """Same bytes, same element count, same math: within a few registers of each other."""
    wider = []
    for p in (1, 2, 4, 8):
        bf16, _ = _cached(reports[kernel], kernel, "bfloat16", 8, p)
        f16, _ = _cached(reports[kernel], kernel, "half", 8, p)
        if bf16 > f16 + 4:
            wider.append(f"{p} packs a thread: bf16 {bf16}, f16 {f16}")
    assert not wider, f"{kernel}_cached: " + "; ".join(wider)


@pytest.mark.parametrize("dtype,n", [("float", 4), ("half", 8), ("bfloat16", 8)])
def test_softmax_rows_of_up_to_four_packs_fit_full_occupancy(reports, dtype, n):
    """32 registers a thread: 2048 threads an SM, to hide the two exp passes."""
    for p in (1, 2, 4):
        regs, _ = _cached(reports["softmax"], "softmax", dtype, n, p)
        assert regs <= 32, f"softmax_cached<{dtype}, {n}, {p}>: {regs} registers"
