"""A lab's required pytest in one line, from the kernel's manifest and reference:

    # tests/test_lab.py
    from registry.testing import lab_tests
    test_numerics, test_overhead = lab_tests("axpy")

test_numerics  every op x each dtype its manifest lists x the seed's sizes
               (1, 17, 2^16, 2^28), checked against the reference module by
               the contract registry.sweep applies (registry/notebook/checks.py:
               random inputs shaped by the op's `sweep`, never zeros; the
               output poisoned with NaN first; per-dtype tolerances; NaN, inf
               or an all-zero output never pass). On the CPU 2^28 runs as 2^22
               and the case carries the `scaled` marker saying so.
test_overhead  marked `benchmark`: at the largest size, the op's time against
               its own launcher called directly on the same inputs and a
               preallocated output (the kernel's time without the wrapper),
               measured in interleaved rounds, medians compared; the wrapper
               must cost < 5 %. Timing asserts are noise on a loaded machine,
               so this project's CI deselects `benchmark` (setup.cfg).

The markers are registered by this module as a pytest plugin: a lab's
conftest.py adds `pytest_plugins = ["registry.testing"]` (or lists `benchmark`
and `scaled` under `markers` in its pytest configuration).
"""
from __future__ import annotations

SEED_SIZES = (1, 17, 1 << 16, 1 << 28)
CPU_LARGEST = 1 << 22  # 2^28 on the CPU: minutes per case, the reference in float64 included
OVERHEAD_BOUND = 0.05
MARKERS = (
    "benchmark: a timing assert; deselected by default (pytest -m benchmark runs them)",
    "scaled(from_n, to_n): a seed size run smaller on this device (2^28 as 2^22 on the CPU)",
)


def pytest_configure(config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)


def lab_tests(kernel: str, *, device: str | None = None, sizes=SEED_SIZES, ops: list[str] | None = None):
    """(test_numerics, test_overhead) for `kernel`, parametrized over its ops'
    (op, dtype) pairs and `sizes`; bind them to test_* names in a test module.
    device: "cpu" or "cuda"; by default get's rule (REGISTRY_DEVICE, else CUDA
    when a GPU is visible and the kernel has a [cuda] section)."""
    import pytest

    from registry import environment, knobs
    from registry.resolve import find

    manifest = find(kernel)
    device = device or environment.for_manifest(manifest, knobs.requested_device(None), knobs.cache_dir())
    cases = [(spec.name, dtype) for spec in manifest.ops if ops is None or spec.name in ops for dtype in spec.dtypes]
    if not cases:
        from registry.errors import UsageError

        raise UsageError(f"kernel {kernel!r} has no op named {', '.join(ops or [])}; "
                         f"its ops are {', '.join(s.name for s in manifest.ops)}")
    sized = [_size_param(pytest, n, device) for n in sizes]
    largest = _size_param(pytest, max(sizes), device)
    case_ids = [f"{op}-{dtype}" if len(manifest.ops) > 1 else dtype for op, dtype in cases]

    @pytest.mark.parametrize("n", sized)
    @pytest.mark.parametrize("op_name,dtype", cases, ids=case_ids)
    def test_numerics(op_name, dtype, n):
        from registry.notebook.required_tests import check_numerics

        check_numerics(kernel, op_name, dtype, n, device)

    @pytest.mark.benchmark
    @pytest.mark.parametrize("n", [largest])
    @pytest.mark.parametrize("op_name,dtype", cases, ids=case_ids)
    def test_overhead(op_name, dtype, n):
        from registry.notebook.required_tests import measure_overhead

        timing = measure_overhead(kernel, op_name, dtype, n, device)
        assert timing.overhead < OVERHEAD_BOUND, f"{kernel}.{op_name} {dtype} n={n} on {device}: {timing}"

    return test_numerics, test_overhead


def _size_param(pytest, n: int, device: str):
    if device == "cpu" and n > CPU_LARGEST:
        return pytest.param(CPU_LARGEST, id=f"n{CPU_LARGEST}-scaled-from-n{n}",
                            marks=pytest.mark.scaled(from_n=n, to_n=CPU_LARGEST))
    return pytest.param(n, id=f"n{n}")
