"""Errors say what went wrong and what to do next."""
from __future__ import annotations

import pytest

import registry


def test_unknown_name_lists_kernels_and_closest_match(kernels_root):
    with pytest.raises(registry.KernelNotFoundError) as info:
        registry.get("apxy")
    assert info.value.closest == "axpy"
    assert "axpy" in info.value.known
    assert "Did you mean 'axpy'?" in str(info.value)


def test_manifest_error_names_file_and_field(axpy_copy):
    axpy_copy.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["missing.cpp"]')
    with pytest.raises(registry.ManifestError) as info:
        registry.get(axpy_copy.name)
    assert info.value.file.endswith(f"{axpy_copy.name}/kernel.toml")
    assert info.value.field == "cpu.sources[0]"
    assert "kernel.toml" in str(info.value) and "cpu.sources[0]" in str(info.value)


def test_unlisted_dtype_is_a_clear_error(axpy_copy):
    import torch

    op = registry.get(axpy_copy.name)
    x = torch.randn(4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="dtype Double is not supported; the manifest lists float32, float16, bfloat16"):
        op(x, x, 1.0)


def test_input_checks_name_the_argument_and_never_copy(axpy_copy):
    import torch

    op = registry.get(axpy_copy.name)
    x = torch.randn(8)
    with pytest.raises(RuntimeError, match="argument 'y' is not contiguous"):
        op(x, torch.randn(16)[::2], 1.0)
    with pytest.raises(RuntimeError, match="argument 'y' is Half but 'x' is Float"):
        op(x, torch.randn(8, dtype=torch.half), 1.0)
    with pytest.raises(RuntimeError, match=r"argument 'y' has shape \[9\] but 'x' has shape \[8\]"):
        op(x, torch.randn(9), 1.0)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        op(x, x)


def test_a_notebooks_own_kernels_folder_is_searched(kernels_root, tmp_path, monkeypatch):
    import shutil

    from conftest import CHECKOUT

    shutil.copytree(CHECKOUT / "kernels" / "axpy", tmp_path / "kernels" / "cwd_axpy")
    monkeypatch.chdir(tmp_path)  # where a notebook beside its kernels/ folder runs
    assert "cwd_axpy" in [k.name for k in registry.list()]
    op = registry.get("cwd_axpy", device="cpu")
    assert registry.status("cwd_axpy", device="cpu").manifest == str(tmp_path / "kernels" / "cwd_axpy" / "kernel.toml")
    assert op.kernel == "cwd_axpy"


def test_not_found_names_the_roots_searched(kernels_root, tmp_path, monkeypatch):
    from conftest import CHECKOUT

    monkeypatch.chdir(tmp_path)
    with pytest.raises(registry.KernelNotFoundError) as info:
        registry.get("nosuch_kernel")
    message = str(info.value)
    for root in (kernels_root, tmp_path / "kernels", CHECKOUT / "kernels"):
        assert str(root) in message
    assert "REGISTRY_KERNELS_PATH" in message


def _exception_classes(module) -> list[type]:
    """The module's exception classes; warnings (CompilerWarning) are shown, never raised."""
    return [v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, BaseException) and not issubclass(v, Warning)]


def test_every_error_of_the_package_is_a_registry_error():
    """A tool catches one type: the core's errors (mapped in bindings/module.cc)
    and the Python package's all derive from RegistryError."""
    from registry import _core, errors

    classes = _exception_classes(errors) + _exception_classes(_core)
    assert {"ManifestError", "SignatureError", "UsageError", "CoreError"} <= {c.__name__ for c in classes}
    for error in classes:
        assert issubclass(error, errors.RegistryError), error
    assert issubclass(registry.ManifestError, registry.RegistryError)
    assert registry.ManifestError is _core.ManifestError is errors.ManifestError


def test_a_manifest_error_is_caught_as_a_registry_error(axpy_copy):
    axpy_copy.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["missing.cpp"]')
    with pytest.raises(registry.RegistryError) as info:
        registry.get(axpy_copy.name, device="cpu")
    assert isinstance(info.value, registry.ManifestError) and isinstance(info.value, ValueError)
    assert info.value.field == "cpu.sources[0]"


def test_core_errors_keep_their_builtin_base_and_are_registry_errors(tmp_path):
    from registry import _core
    from registry.errors import CoreError, SignatureError, UsageError

    with pytest.raises(UsageError, match="cache root is empty") as info:  # std::invalid_argument
        _core.CacheStore("")
    assert isinstance(info.value, ValueError) and isinstance(info.value, registry.RegistryError)
    with pytest.raises(CoreError) as info:  # std::runtime_error
        _core.write_file_atomic(str(tmp_path / "no such folder" / "file"), "text")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, registry.RegistryError)
    with pytest.raises(SignatureError):
        _core.parse_signature("axpy(Tensor x")
    with pytest.raises(TypeError):  # pybind11's own errors stay theirs
        _core.CacheStore(42)


def test_a_bad_setting_is_a_registry_error(monkeypatch):
    from registry.errors import SettingError

    monkeypatch.setenv("REGISTRY_DEVICE", "gpu")
    with pytest.raises(SettingError, match="REGISTRY_DEVICE must be 'cpu' or 'cuda'") as info:
        registry.get("axpy")
    assert isinstance(info.value, ValueError) and isinstance(info.value, registry.RegistryError)


def test_status_of_a_kernel_not_loaded_is_a_registry_error():
    with pytest.raises(registry.RegistryError, match="has not been loaded in this process") as info:
        registry.status("never_loaded_here")
    assert isinstance(info.value, LookupError)


def test_a_noncontiguous_argument_written_in_place_is_not_told_to_pass_a_copy(kernels_root):
    import torch

    from conftest import KernelCopy, _counter

    copy = KernelCopy(kernels_root, "scale", f"scale_t{next(_counter)}")
    op = registry.get(copy.name, device="cpu")
    view = torch.ones(16)[::2]
    for call in (lambda: op(view, 2.0), lambda: op._call_raw((view, 2.0))):  # fast entry, dispatcher
        with pytest.raises(RuntimeError) as info:
            call()
        message = str(info.value).splitlines()[0]
        assert "argument 'x' is not contiguous" in message, message
        assert "pass .contiguous()" not in message, message  # the op would write a copy nobody sees
        assert "written in place" in message, message
        assert "x.copy_(" in message, message
    # Passing a read-only argument as a copy is still the advice there.
    axpy = registry.get("axpy", device="cpu")
    with pytest.raises(RuntimeError, match=r"argument 'y' is not contiguous .*pass .contiguous\(\)"):
        axpy(torch.randn(8), torch.randn(16)[::2], 1.0)
