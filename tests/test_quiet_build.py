"""A CPU build prints nothing about CUDA: torch's "No CUDA runtime is found"
warning (logged when torch.utils.cpp_extension is first imported on a machine
with a CUDA toolkit but no GPU) is not the user's business on a CPU build.

Checked in a fresh process, where the import really happens, with Python
warnings and torch's log both going to the captured stderr.
"""
from __future__ import annotations

from conftest import KernelCopy
from reliability_helpers import Child, child_env
from reliability_helpers import binding_seed, private_cache, private_kernels  # noqa: F401 (fixtures)


def test_first_cpu_build_prints_no_cuda_warning(private_cache, private_kernels):
    copy = KernelCopy(private_kernels, "axpy", "axpy_quiet")
    script = ("import sys, warnings\nwarnings.simplefilter('always')\n"
              "assert 'torch.utils.cpp_extension' not in sys.modules\n"
              "say(**check(os.environ['KERNEL']))")
    child = Child(script, child_env(private_cache, private_kernels, KERNEL=copy.name))
    result = child.message(timeout=300)
    assert child.finish() == 0, child.stderr_text()
    assert result["ok"] and ["axpy_quiet", "kernel-lib"] in result["builds"], result
    assert "No CUDA runtime" not in child.stderr_text(), child.stderr_text()
