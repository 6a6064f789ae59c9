"""The IPython extension, driven through IPython's own magic machinery."""
from __future__ import annotations

import itertools
import re

import time

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

import registry
from registry.notebook import magics
from registry.resolve import find

_names = itertools.count()

# The launcher ABI (registry/include/kreg/abi.h) for an op named axpy: the
# same signature as the checkout's axpy, so the session's binding is reused.
SIGNATURE = '--signature "axpy(Tensor x, Tensor y, float alpha) -> Tensor"'
SOURCE = r"""
#include "kreg/abi.h"

KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void*) {
  auto* o = static_cast<float*>(out.data);
  auto* xs = static_cast<const float*>(x.data);
  auto* ys = static_cast<const float*>(y.data);
  for (int64_t i = 0; i < out.numel; ++i) o[i] = alpha * xs[i] + ys[i] + OFFSET;
  return nullptr;
}
"""


def cell(offset: str = "0.0f") -> str:
    return SOURCE.replace("OFFSET", offset)


@pytest.fixture(scope="module")
def shell():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "registry.notebook.magics")
    yield ip
    ip.run_line_magic("unload_ext", "registry.notebook.magics")


@pytest.fixture
def name(kernels_root) -> str:
    # kernels_root: a private cache and kernels path for the session
    return f"inline_t{next(_names)}"


def _offset(op) -> float:
    x, y = torch.randn(33), torch.randn(33)
    return float((op(x, y, 2.0) - (2.0 * x + y)).mean())


def test_kernel_cell_builds_and_binds_the_op(shell, name, compiles, capsys):
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", cell())
    op = shell.user_ns[name]
    assert isinstance(op, registry.Op)
    assert _offset(op) == pytest.approx(0.0, abs=1e-6)
    assert (name, "kernel-lib") in compiles(name)  # (and the binding, if this session has not built it yet)
    folder = magics.inline_root() / name
    assert (folder / f"{name}.cpp").read_text().strip() == cell().strip()
    assert not (folder / "kernel.toml").exists()  # the manifest is held in memory, by the core
    manifest = find(name)
    assert manifest.file == f"%%kernel {name}" and manifest.dir == str(folder)
    text = manifest.inline_text
    assert "format = 1" in text and "[cpu]" in text and 'dtypes = ["float32"]' in text
    assert [k for k in registry.list() if k.name == name][0].manifest == f"%%kernel {name}"
    with pytest.raises(registry.KernelNotFoundError, match=f"Did you mean '{name}'.*{name} \\(a %%kernel cell\\)"):
        registry.get(name + "x")
    assert f"{name}: axpy(Tensor x, Tensor y, float alpha) -> Tensor [cpu], compiled" in capsys.readouterr().out


def test_unchanged_cell_is_a_hit_and_an_edit_hot_reloads(shell, name, compiles):
    line = f"{name} --cpu {SIGNATURE}"
    shell.run_cell_magic("kernel", line, cell())
    op = shell.user_ns[name]
    source = magics.inline_root() / name / f"{name}.cpp"
    mtime = source.stat().st_mtime_ns
    # Right after the cell wrote its file the file's stamp is racy (core/file_stamp.h):
    # a get then re-hashes instead of answering in-process. Wait the tick out and
    # let one run re-record the stamp; from then on the hot path answers alone.
    time.sleep(0.15)
    shell.run_cell_magic("kernel", line, cell())
    shell.run_cell_magic("kernel", line, cell())
    assert source.stat().st_mtime_ns == mtime  # not rewritten
    assert registry.status(name).outcome == "in-process"
    assert compiles(name).count((name, "kernel-lib")) == 1

    shell.run_cell_magic("kernel", line, cell("3.0f"))
    assert shell.user_ns[name] is op  # the same handle...
    assert _offset(op) == pytest.approx(3.0, abs=1e-5)  # ...runs the new code
    assert compiles(name).count((name, "kernel-lib")) == 2

    shell.run_cell_magic("kernel", line, cell())  # back to the first version: no compile
    assert _offset(op) == pytest.approx(0.0, abs=1e-6)
    assert compiles(name).count((name, "kernel-lib")) == 2


F64_SOURCE = cell() + r"""
KREG_API const char* axpy_f64(kreg_tensor out, kreg_tensor x, kreg_tensor y, double alpha, void*) {
  auto* o = static_cast<double*>(out.data);
  auto* xs = static_cast<const double*>(x.data);
  auto* ys = static_cast<const double*>(y.data);
  for (int64_t i = 0; i < out.numel; ++i) o[i] = alpha * xs[i] + ys[i];
  return nullptr;
}
"""


def test_an_edit_of_the_cells_line_alone_rebuilds(shell, name, compiles):
    """The manifest is in memory: no file moves when only the line changes
    (here --dtypes), yet the next run must not be served as it was."""
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", F64_SOURCE)
    op = shell.user_ns[name]
    x = torch.randn(9, dtype=torch.float64)
    time.sleep(0.15)  # past the source's racy stamp (core/file_stamp.h); one run records it,
    for _ in range(2):  # and from then on the hot path answers alone
        shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", F64_SOURCE)
    assert registry.status(name).outcome == "in-process"
    with pytest.raises(registry.RegistryError, match="dtype Double is not supported"):
        op(x, x, 2.0)
    shell.run_cell_magic("kernel", f"{name} --cpu --dtypes float32,float64 {SIGNATURE}", F64_SOURCE)
    assert shell.user_ns[name] is op
    assert torch.allclose(op(x, x, 2.0), 3 * x)
    assert compiles(name).count((name, "kernel-lib")) == 2
    assert "file:kernel.toml changed" in registry.status(name).changes
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", F64_SOURCE)  # the line as it was: no compile
    assert compiles(name).count((name, "kernel-lib")) == 2
    with pytest.raises(registry.RegistryError, match="dtype Double is not supported"):
        op(x, x, 2.0)


def test_registry_line_magic(shell, name, compiles, capsys, axpy_copy):
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", cell())
    capsys.readouterr()
    shell.run_line_magic("registry", f"status {name}")
    out = capsys.readouterr().out
    assert f"kernel {name} [cpu]" in out and "last get:" in out
    shell.run_line_magic("registry", "list")
    assert f"{name} (loaded)" in capsys.readouterr().out
    shell.run_line_magic("registry", "ccache")
    assert "ccache" in capsys.readouterr().out
    shell.run_line_magic("registry", f"rebuild {name}")
    assert "forced rebuild" in capsys.readouterr().out
    assert compiles(name).count((name, "kernel-lib")) == 2
    shell.run_line_magic("registry", f"status {axpy_copy.name}")  # exists, never loaded
    assert "not loaded" in capsys.readouterr().out
    shell.run_line_magic("registry", "frobnicate")
    assert "usage: %registry" in capsys.readouterr().out


def test_build_error_in_a_cell_renders_the_source_line(shell, name, capsys):
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", cell())
    op = shell.user_ns[name]
    capsys.readouterr()
    result = shell.run_cell(f"%%kernel {name} --cpu {SIGNATURE}\n" + cell("undefined_offset"))
    assert isinstance(result.error_in_exec, registry.BuildError)
    out = capsys.readouterr().out
    # The cell's own line (the %%kernel line is line 1), not the cache's copy of it.
    line = 1 + next(i for i, text in enumerate(cell("undefined_offset").split("\n"), 1) if "undefined_offset" in text)
    assert f"cell '{name}', line {line}, column" in out and "undefined_offset" in out
    assert any(re.match(rf"\s*>\s+{line} \|", text) and "undefined_offset" in text for text in out.splitlines()), out
    assert f"{magics.inline_root() / name / name}.cpp:" not in out.split("compiler log")[0]
    assert f"cell '{name}', line {line}" in str(result.error_in_exec)
    assert "Traceback" not in out
    assert _offset(op) == pytest.approx(0.0, abs=1e-6)  # the previous code still runs


def test_bad_arguments_say_what_to_write(shell):
    with pytest.raises(ValueError, match="not a valid kernel name"):
        shell.run_cell_magic("kernel", f"BadName --cpu {SIGNATURE}", cell())
    with pytest.raises(ValueError, match="pass --signature"):
        shell.run_cell_magic("kernel", "inline_nosig --cpu", cell())
    with pytest.raises(ValueError, match="unknown dtype float8"):
        shell.run_cell_magic("kernel", f"inline_dt --cpu --dtypes float8 {SIGNATURE}", cell())


def test_unload_restores_the_exception_display(shell):
    assert shell.custom_exceptions == (registry.RegistryError,)  # BuildError, ManifestError and the others
    shell.run_line_magic("unload_ext", "registry.notebook.magics")
    assert registry.RegistryError not in shell.custom_exceptions
    assert "kernel" not in shell.magics_manager.magics["cell"]
    shell.run_line_magic("load_ext", "registry.notebook.magics")
    assert registry.RegistryError in shell.custom_exceptions


CUDA_SOURCE = r"""
#include "kreg/abi.h"

__global__ void axpy_kernel(float* out, const float* x, const float* y, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = alpha * x[i] + y[i] + OFFSET;
}

KREG_API const char* axpy_f32(kreg_tensor out, kreg_tensor x, kreg_tensor y, float alpha, void* stream) {
  const int64_t blocks = (out.numel + 255) / 256;
  axpy_kernel<<<blocks < 4096 ? blocks : 4096, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<float*>(out.data), static_cast<const float*>(x.data), static_cast<const float*>(y.data),
      alpha, out.numel);
  cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_kernel_cell_builds_and_hot_reloads(shell, name, compiles):
    line = f"{name} --cuda {SIGNATURE}"
    shell.run_cell_magic("kernel", line, CUDA_SOURCE.replace("OFFSET", "0.0f"))
    op = shell.user_ns[name]
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    torch.testing.assert_close(op(x, y, 2.0), 2.0 * x + y)
    assert (magics.inline_root() / name / f"{name}.cu").exists()
    shell.run_cell_magic("kernel", line, CUDA_SOURCE.replace("OFFSET", "1.0f"))
    torch.testing.assert_close(op(x, y, 2.0), 2.0 * x + y + 1.0)
    assert compiles(name).count((name, "kernel-lib")) == 2


def test_kernel_cell_without_a_backend_flag_uses_the_default(shell, name, capsys):
    shell.run_cell_magic("kernel", f"{name} {SIGNATURE}", cell())
    op = shell.user_ns[name]
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert op.backend == expected
    assert f"[{expected}]" in capsys.readouterr().out
    if expected == "cpu":
        assert _offset(op) == pytest.approx(0.0, abs=1e-6)


def test_kernel_cell_without_a_backend_flag_follows_registry_device(shell, name, monkeypatch):
    """The cell's default backend is get's rule: REGISTRY_DEVICE first, even on a GPU machine."""
    from registry import environment

    monkeypatch.setattr(environment, "cuda_available", lambda cache_root: True)  # as on a GPU machine
    monkeypatch.setenv("REGISTRY_DEVICE", "cpu")
    shell.run_cell_magic("kernel", f"{name} {SIGNATURE}", cell())
    assert shell.user_ns[name].backend == "cpu"
    assert "[cpu]" in find(name).inline_text


RENAMED = '--signature "axpy_again(Tensor x, Tensor y, float alpha) -> Tensor"'


def test_signature_renamed_in_the_cell_rebinds_an_op_not_a_group(shell, name):
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", cell())
    old = shell.user_ns[name]
    renamed_source = cell().replace("axpy_f32", "axpy_again_f32")
    shell.run_cell_magic("kernel", f"{name} --cpu {RENAMED}", renamed_source)
    op = shell.user_ns[name]
    assert isinstance(op, registry.Op) and op.name == "axpy_again"
    assert _offset(op) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(registry.RegistryError, match=f"op 'axpy' is no longer part of kernel '{name}'"):
        old(torch.randn(3), torch.randn(3), 1.0)


def _run_tidily(shell, capsys, code: str, error_type):
    """Runs a cell as a notebook does; the error must be shown without a traceback."""
    capsys.readouterr()
    result = shell.run_cell(code)
    assert isinstance(result.error_in_exec, error_type)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text and "site-packages" not in text and "registry/resolve.py" not in text
    assert type(result.error_in_exec).__name__ in text
    return text


def test_errors_that_are_not_compile_errors_show_without_a_traceback(shell, name, capsys):
    text = _run_tidily(shell, capsys, "import registry\nregistry.get('nosuch_kernel')",
                       registry.KernelNotFoundError)
    assert "no kernel named 'nosuch_kernel'" in text
    assert "line 2" in text and "registry.get('nosuch_kernel')" in text  # where, in the cell

    bad_signature = '--signature "axpy(Tensor x, Tensr y) -> Tensor"'
    text = _run_tidily(shell, capsys, f"%%kernel {name} --cpu {bad_signature}\n{cell()}", registry.ManifestError)
    assert "signature" in text and "Tensr" in text

    text = _run_tidily(shell, capsys, f"%%kernel {name}_s --cpu\n{cell()}", registry.RegistryError)
    assert "pass --signature" in text


def test_missing_launcher_is_a_build_error_shown_like_a_compile_error(shell, name, capsys):
    # Launchers are checked when the library is built (core/launcher_header.h),
    # so a missing one is a BuildError, rendered as compile errors are.
    missing_launcher = cell().replace("axpy_f32", "axpy_f32_misspelled")
    capsys.readouterr()
    result = shell.run_cell(f"%%kernel {name}_l --cpu {SIGNATURE}\n{missing_launcher}")
    assert isinstance(result.error_in_exec, registry.BuildError)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text and "registry/resolve.py" not in text
    assert "no launcher for float32" in text and "axpy_f32" in text


def test_wrong_argument_type_in_a_cell_names_the_op(shell, name, capsys):
    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", cell())
    text = _run_tidily(shell, capsys, f"import torch\n{name}(torch.randn(3), torch.randn(3), 'a')", TypeError)
    assert "kreg_" not in text and "axpy(Tensor x, Tensor y, float alpha) -> Tensor" in text


def test_status_of_a_kernel_that_does_not_exist_says_so(shell, capsys):
    shell.run_line_magic("registry", "status apxy")
    out = capsys.readouterr().out
    assert "not loaded" not in out
    assert "no kernel named 'apxy'" in out and "Did you mean 'axpy'?" in out


ROWMAX_SOURCE = r"""
#include "kreg/abi.h"

KREG_API const char* rowmax_f32(kreg_tensor values, kreg_tensor indices, kreg_tensor x, void*) {
  const int64_t cols = x.sizes[x.ndim - 1], rows = cols ? x.numel / cols : 0;
  const float* xs = static_cast<const float*>(x.data);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (int64_t c = 1; c < cols; ++c) if (xs[r * cols + c] > xs[r * cols + at]) at = c;
    static_cast<float*>(values.data)[r] = xs[r * cols + at];
    static_cast<int64_t*>(indices.data)[r] = at;
  }
  return nullptr;
}
"""
ROWMAX = '--signature "rowmax(Tensor x) -> (Tensor values, Tensor indices)"'


@pytest.mark.parametrize("outputs", [
    """'{ values = "x.dtype[x.shape[:-1]]", indices = "int64[x.shape[:-1]]" }'""",
    """'values = "x.dtype[x.shape[:-1]]", indices = "int64[x.shape[:-1]]"'""",  # braces left out
])
def test_a_cell_declares_its_outputs_as_a_manifest_does(shell, name, outputs):
    shell.run_cell_magic("kernel", f"{name} --cpu {ROWMAX} --outputs {outputs}", ROWMAX_SOURCE)
    x = torch.randn(5, 33)
    values, indices = shell.user_ns[name](x)
    want = torch.max(x, -1)
    assert torch.equal(values, want.values) and torch.equal(indices, want.indices)
    assert indices.dtype == torch.int64 and values.shape == (5,)


def test_outputs_that_are_not_a_table_of_strings_are_refused(shell, name):
    for outputs in ["'values = like x'", "'{ values = 3 }'",
                    """'{ values = "like x" }\n[cuda]\nsources = ["evil.cu"]'"""]:
        with pytest.raises(registry.RegistryError, match="--outputs takes the manifest's table of outputs"):
            shell.run_cell_magic("kernel", f"{name} --cpu {ROWMAX} --outputs {outputs}", ROWMAX_SOURCE)


def test_a_cells_kernel_exports_as_a_package_with_its_manifest(shell, name, tmp_path):
    from registry.tools.aot import export_package

    shell.run_cell_magic("kernel", f"{name} --cpu {SIGNATURE}", cell())
    out = export_package(name, tmp_path / "pkg")
    assert (out / "csrc" / "kernel" / "kernel.toml").read_text() == find(name).inline_text
    assert (out / "csrc" / "kernel" / f"{name}.cpp").read_text().strip() == cell().strip()
