"""Ready ops on the GPU: stream, graphs, dtypes, input checks, overhead.

Run on a CUDA machine: `python -m pytest -m gpu -v`. Without a GPU these are
reported as skipped.
"""
from __future__ import annotations

import ctypes

import pytest
import torch

import registry
from registry import _core
from registry.notebook.timing import cuda_median_ms
from conftest import KernelCopy
from device_build_helpers import NEEDS_NVCC
from figures import figure
from kernel_contract import DTYPES, cases, check, check_op

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

SIZES = [1, 17, 1 << 16, 1 << 28]


def _on_every_device_path() -> list:
    """cases("cuda"), and those of each kernel whose device code goes through
    NVRTC once more through `nvcc -cubin`: that path has no kernel folder of
    its own (its example is kernels/axpy_nvrtc with the compiler line
    switched), and this keeps it in the numerics of every kernel. A kernel
    with a precompiled prelude is NVRTC's alone (the manifest refuses a
    prelude with another compiler)."""
    out = []
    for manifest, op, dtype in cases("cuda"):
        out.append(pytest.param(manifest, op, dtype, None, id=f"{manifest.name}-{op.name}-{dtype}"))
        if manifest.cuda.compiler == "nvrtc" and not manifest.cuda.prelude:
            out.append(pytest.param(manifest, op, dtype, "nvcc-cubin", marks=NEEDS_NVCC,
                                    id=f"{manifest.name}.nvcc-cubin-{op.name}-{dtype}"))
    return out


_switched: dict[str, object] = {}


def _with_device_compiler(manifest, compiler: str, kernels_root):
    """The manifest of a copy of `manifest`'s kernel whose device code goes
    through `compiler`: one copy per session, so its builds are shared by
    every dtype and size."""
    name = f"{manifest.name}_{compiler.replace('-', '_')}"
    if name not in _switched:
        copy = KernelCopy(kernels_root, manifest.name, name)
        copy.edit("kernel.toml", f'compiler = "{manifest.cuda.compiler}"', f'compiler = "{compiler}"')
        _switched[name] = _core.parse_manifest(str(copy.path("kernel.toml")))
    return _switched[name]


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"n{n}")
@pytest.mark.parametrize("manifest,op,dtype,compiler", _on_every_device_path())
def test_numerics_against_reference(manifest, op, dtype, compiler, n, request):
    if compiler is not None:
        manifest = _with_device_compiler(manifest, compiler, request.getfixturevalue("kernels_root"))
    if op.name == "matmul" and n > 1 << 24:
        pytest.skip("the tiled matmul is checked up to 2^24 elements (numerics, not speed)")
    if manifest.name == "gemm_nvrtc" and n < 64:
        pytest.skip("gemm_nvrtc takes rows of a multiple of 16 bytes only (its kernel.toml; it refuses others with "
                    "a message): the seed's n = 1 and 17 give rows of 2 and 66 bytes, which kernels/gemm covers")
    if op.name == "gemm" and n > 1 << 24:
        pytest.skip("gemm's float64 reference on the CPU at 2^28 (a [65536, 4096] @ [4096, 4096]) takes minutes; "
                    "tests/test_gemm.py checks 4096^3")
    passed, worst, why = check_op(manifest, op, DTYPES[dtype], n, "cuda")
    assert passed, f"{manifest.name}.{op.name} {dtype} n={n}: {why} (max abs error {worst:.3g})"


@pytest.fixture(scope="module")
def axpy():
    return registry.get("axpy", device="cuda")


def test_runs_on_the_current_stream(axpy):
    """The op consumes the result of a long kernel queued on stream s, with no
    device synchronize in between: correct only if it is ordered on s."""
    n = 1 << 24
    x_src, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    x = torch.full((n,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # ~25 ms of spinning on s
        x.copy_(x_src)
        out = axpy(x, y, 1.5)
    s.synchronize()
    torch.testing.assert_close(out, 1.5 * x_src + y)


def test_captured_in_a_cuda_graph_and_replayed(axpy):
    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        axpy(x, y, 1.5)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = axpy(x, y, 1.5)
    for _ in range(3):
        x.copy_(torch.randn(n, device="cuda"))
        y.copy_(torch.randn(n, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 1.5 * x + y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("offset", [1, 3])
def test_misaligned_views_and_odd_sizes(axpy, dtype, offset):
    for n in (5, 1000, (1 << 20) + 7):
        base_x = torch.randn(n + offset, device="cuda").to(dtype)
        base_y = torch.randn(n + offset, device="cuda").to(dtype)
        x, y = base_x[offset:], base_y[offset:]
        assert x.is_contiguous() and x.data_ptr() % 16 != 0
        out = axpy(x, y, 1.5)
        passed, worst, why = check(out, 1.5 * x.double() + y.double(), dtype)
        assert passed, f"offset {offset} n={n} {dtype}: {why}"


def test_cpu_tensor_to_cuda_op_is_an_error_naming_the_argument(axpy):
    x = torch.randn(8, device="cuda")
    with pytest.raises(RuntimeError, match="argument 'y' is on cpu but this build of the op runs on CUDA"):
        axpy(x, torch.randn(8), 1.0)


def test_shape_error_names_both_shapes(axpy):
    # Formatting numbers is where a module with its own libstdc++ copy breaks
    # (tests/test_static_libstdcxx.py): checked here with the GPU machine's compiler.
    with pytest.raises(RuntimeError, match=r"argument 'y' has shape \[9\] but 'x' has shape \[8\]"):
        axpy(torch.randn(8, device="cuda"), torch.randn(9, device="cuda"), 1.0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_different_gpus_is_an_error(axpy):
    with pytest.raises(RuntimeError, match="put all tensors on one device"):
        axpy(torch.randn(8, device="cuda:0"), torch.randn(8, device="cuda:1"), 1.0)


def test_output_comes_from_the_pytorch_allocator(axpy):
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    before = torch.cuda.memory_allocated()
    out = axpy(x, y, 1.5)
    assert torch.cuda.memory_allocated() - before >= out.numel() * out.element_size()


def _profiled_names(fn) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events()]


def test_outputs_of_every_kind_come_straight_from_the_cuda_allocator():
    """Two outputs of different dtypes, allocated from torch's CUDA caching
    allocator (counted by it, on the inputs' device) without at::empty; with
    deterministic algorithms on, from at::empty, which fills new memory first
    (NaN), as torch's own empty tensors are. (On the stable ABI a CUDA output
    comes from aoti_torch_empty_strided, which torch 2.11 serves through the
    dispatcher's aten::empty_strided: the one dispatcher call per CUDA output
    the binding cannot avoid there.)"""
    rowmax = registry.get("rowmax", device="cuda")
    x = torch.randn(64, 1000, device="cuda")
    before = torch.cuda.memory_allocated()
    values, indices = rowmax(x)
    assert torch.cuda.memory_allocated() - before >= values.numel() * 4 + indices.numel() * 8
    assert (values.device, indices.device, indices.dtype) == (x.device, x.device, torch.int64)
    assert torch.equal(values, x.max(-1).values) and torch.equal(indices, x.argmax(-1))
    names = _profiled_names(lambda: rowmax(x))
    assert "aten::empty" not in names and "aten::fill_" not in names, names
    torch.use_deterministic_algorithms(True)
    try:
        names = _profiled_names(lambda: rowmax(x))
        values, indices = rowmax(x)
    finally:
        torch.use_deterministic_algorithms(False)
    assert "aten::empty" in names and "aten::fill_" in names, names
    assert torch.equal(values, x.max(-1).values) and torch.equal(indices, x.argmax(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_wrapper_overhead_under_5_percent_at_2_28(axpy, dtype):
    """Op time (checks, allocation, dispatch, launch) against the kernel's own
    time: the same launcher called directly through its address."""
    from registry.state import STATE
    from kreg_tensor import KregTensor

    n = 1 << 28
    x, y = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
    out = torch.empty_like(x)
    suffix = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    library = STATE.libraries[axpy.key]
    launcher = getattr(library, f"axpy_{suffix}")
    launcher.restype = ctypes.c_char_p
    kout, kx, ky = KregTensor.of(out), KregTensor.of(x), KregTensor.of(y)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def kernel_only():
        assert launcher(kout, kx, ky, ctypes.c_float(1.5), stream) is None

    kernel_ms = cuda_median_ms(kernel_only)
    op_ms = cuda_median_ms(lambda: axpy(x, y, 1.5))
    overhead = (op_ms - kernel_ms) / kernel_ms
    figure(f"wrapper overhead at n=2^28, {dtype}: op {op_ms:.4f} ms, launcher alone {kernel_ms:.4f} ms, "
           f"{overhead:+.2%}")
    assert overhead < 0.05, f"wrapper overhead {overhead:.1%} ≥ 5% (op {op_ms:.4f} ms, kernel {kernel_ms:.4f} ms)"
