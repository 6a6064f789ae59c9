"""The library's row kernels on the GPU: every way a launcher lays rows onto
threads (kreg::plan_rows: a warp per short row with several rows a block,
1/2/4/8 register packs a thread, rows too long for registers, rows that do
not fit 16-byte packs), rowmax's special values, and the bandwidth they must
keep at the largest sweep shape.

Run on a CUDA machine: `python -m pytest -m gpu tests/test_gpu_row_kernels.py`.
"""
from __future__ import annotations

import pytest
import torch

import registry
from registry.notebook.checks import DEFAULT_SCALARS, check_call, load_reference
from registry.notebook.timing import cuda_median_ms, graph_median_ms
from registry.op import _default_value
from figures import figure
from kernel_contract import manifests, op_handle, reference

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ROW_KERNELS = ["softmax", "rmsnorm", "layernorm", "rowmax", "quantize"]
# Row lengths in elements; 16-byte packs hold 4 (f32) or 8 (bf16) of them:
# one element; ragged (element-wise path); one warp a row with 1, 2 and 4
# packs a thread; two-warp rows two a block (f32 1024); 4 packs of 256 or
# 640 threads; 8 packs a thread (f32 20000, bf16 40000); longer than
# registers hold (the looping path: f32 40000, both at 65600).
COLS = [1, 33, 96, 256, 504, 1024, 4096, 20000, 40000, 65600]
ROWS = 37  # odd: blocks that hold several rows get rows past the end


def _ops():
    by_name = {m.name: m for m in manifests()}
    return [(by_name[k], op) for k in ROW_KERNELS for op in by_name[k].ops]


def _args(op, rows: int, cols: int, dtype, generator) -> list:
    """Inputs shaped like the op's sweep: [rows, cols] for row tensors, [cols] for the rest."""
    args = []
    shapes = {name: (rows, cols) if len(dims) == 2 else (cols,) for name, dims in op.sweep}
    for arg in op.signature.args:
        if arg.type_name == "Tensor":
            t = torch.randn(shapes[arg.name], generator=generator, dtype=torch.float32)  # as the sweep draws them
            args.append(t.to(dtype).cuda())
        elif arg.has_default:
            args.append(_default_value(arg))
        else:
            args.append(DEFAULT_SCALARS[arg.type_name])
    return args


@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("manifest,op", _ops(), ids=lambda v: getattr(v, "name", v))
def test_every_row_plan_against_the_reference(manifest, op, dtype, cols):
    args = _args(op, ROWS, cols, dtype, torch.Generator().manual_seed(cols))
    handle = op_handle(manifest, op, "cuda")
    result = check_call(handle, op, reference(manifest, op), args, load_reference(manifest))
    assert result.passed, f"{manifest.name}.{op.name} {dtype} {ROWS}x{cols}: {result.reason}"


@pytest.mark.parametrize("cols", [5, 33, 256, 4096, 70000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_rowmax_nan_infinities_ties_and_signed_zeros(dtype, cols):
    rowmax = registry.get("rowmax", device="cuda")
    x = torch.randn(8, cols).to(dtype)
    x[0, cols // 2] = float("nan")                   # a NaN beats every number
    x[1, :] = float("-inf")                          # all -inf: index 0
    x[2, :] = 1.0                                    # ties: the first index
    x[3, :] = -1.0
    x[3, cols - 1] = 0.0
    x[3, cols // 3] = -0.0                           # -0 == +0: the first of them
    x[4, cols - 1] = float("inf")
    x[5, cols // 2:] = float("nan")                  # several NaNs: the first
    x[6, :] = -3.0                                   # all equal and negative
    values, indices = rowmax(x.cuda())
    expected = x.double().argmax(dim=-1)
    assert torch.equal(indices.cpu(), expected), (indices.cpu(), expected)
    picked = x.double().gather(-1, expected[:, None]).squeeze(-1)
    assert torch.equal(values.cpu().double().nan_to_num(7.0), picked.nan_to_num(7.0))


def _seconds_per_call(fn) -> float:
    """Kernel time of one call, replayed from a CUDA graph (no host work)."""
    return graph_median_ms(fn) / 1e3


def _copy_gbps() -> float:
    """A 1 GiB device-to-device copy, read + write bytes, launched eagerly back
    to back (as registry.sweep measures it). Not from a graph: a captured
    copy_ becomes a memcpy node, which ran at ~2.7 TB/s on an H200 against
    ~4.15 TB/s for the eager copy, and would flatter every kernel."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / (cuda_median_ms(lambda: dst.copy_(src)) / 1e3) / 1e9


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_row_kernels_reach_80_percent_of_copy_bandwidth_at_2_28(dtype):
    """The largest sweep shape (65536 x 4096): every byte of every input and
    output, over the kernel's own time, against a device copy's read + write."""
    copy = _copy_gbps()
    x = torch.randn(65536, 4096, device="cuda").to(dtype)
    w, b = torch.randn(4096, device="cuda").to(dtype), torch.randn(4096, device="cuda").to(dtype)
    ops = {
        "softmax": (lambda: registry.get("softmax", device="cuda")(x, 1.0), x.nbytes * 2),
        "rmsnorm": (lambda: registry.get("rmsnorm", device="cuda").ops["rmsnorm"](x, w, 1e-6), x.nbytes * 2),
        "layernorm": (lambda: registry.get("layernorm", device="cuda")(x, w, b, 1e-5), x.nbytes * 2),
        "rowmax": (lambda: registry.get("rowmax", device="cuda")(x), x.nbytes),
        "quantize": (lambda: registry.get("quantize", device="cuda")(x), x.nbytes + x.numel()),
    }
    slow = []
    for name, (fn, moved) in ops.items():
        fraction = moved / _seconds_per_call(fn) / 1e9 / copy
        figure(f"{name} {dtype} at 65536 x 4096: {fraction:.2f} of a device copy ({copy:.0f} GB/s)")
        if fraction < 0.8:
            slow.append(f"{name} {fraction:.2f}")
    assert not slow, f"under 80 % of copy bandwidth: {', '.join(slow)}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_rmsnorm_backward_is_parallel_over_rows(dtype):
    """grad_weight sums down 65536 rows: with the sum spread over the GPU the
    backward moves about 5 / 2 of the forward's bytes and should take well
    under 4 forwards (a thread per column walking every row took ~30)."""
    ops = registry.get("rmsnorm", device="cuda").ops
    x, g = torch.randn(65536, 4096, device="cuda").to(dtype), torch.randn(65536, 4096, device="cuda").to(dtype)
    w = torch.randn(4096, device="cuda").to(dtype)
    forward = _seconds_per_call(lambda: ops["rmsnorm"](x, w, 1e-6))
    backward = _seconds_per_call(lambda: ops["rmsnorm_backward"](g, x, w, 1e-6))
    figure(f"rmsnorm {dtype} at 65536 x 4096: backward {backward * 1e3:.3f} ms, forward {forward * 1e3:.3f} ms")
    assert backward < 4 * forward, f"backward {backward * 1e3:.3f} ms vs forward {forward * 1e3:.3f} ms"
