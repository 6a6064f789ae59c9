"""One kernel, one backend, one handle: what `get` returns and what `status` says.

A handle is the notebook's name for an op. It must not depend on how the
backend was asked for, must not outlive the op it names, and `status` must
describe the `get` that just ran, not an earlier one.
"""
from __future__ import annotations

import pytest
import torch

import registry
from axpy_edits import axpy_bias, axpy_inputs

# A second op for the axpy copies: the launcher the copy already exports,
# under another name, so a test can make a kernel with two ops.
SECOND_OP = '''
[[op]]
signature = "axpy_again(Tensor x, Tensor y, float alpha) -> Tensor"
launcher = "axpy"
dtypes = ["float32"]
'''


def test_default_and_explicit_device_give_one_handle(axpy_copy, compiles):
    default = registry.get(axpy_copy.name)
    backend = default.backend  # what "no device" means on this machine
    explicit = registry.get(axpy_copy.name, device=backend)
    assert explicit is default
    assert registry.status(axpy_copy.name, device=backend) is registry.status(axpy_copy.name)

    # An edit reaches both spellings: the explicit one is not a stale copy.
    axpy_copy.edit("include/axpy/config.h", "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 2.0f")
    assert registry.get(axpy_copy.name, device=backend) is default
    assert axpy_bias(explicit) == pytest.approx(2.0, abs=1e-5)
    assert registry.get(axpy_copy.name) is default
    assert compiles(axpy_copy.name).count((axpy_copy.name, "kernel-lib")) == 2


def test_explicit_device_first_then_default_is_the_same_handle(axpy_copy):
    backend = "cuda" if torch.cuda.is_available() else "cpu"
    explicit = registry.get(axpy_copy.name, device=backend)
    assert registry.get(axpy_copy.name) is explicit


def test_status_after_an_in_process_get_describes_that_get(axpy_copy):
    registry.get(axpy_copy.name)
    built = registry.status(axpy_copy.name)
    assert built.outcome == "compiled" and built.compiled and built.build_seconds > 0
    assert built.changes  # "no previous build recorded in this cache"

    registry.get(axpy_copy.name)
    now = registry.status(axpy_copy.name)
    assert now.outcome == "in-process"
    assert now.compiled == [] and now.build_seconds == 0
    assert now.changes == [] and now.ccache is None and now.notes == []
    assert now.key == built.key and now.artifacts == built.artifacts
    assert now.last_build_seconds == built.last_build_seconds  # the library in use still took that long
    assert "compiled" not in str(now).split("\n")[1]  # the "last get:" line
    assert "ccache:" not in str(now)
    # What an earlier status() returned still describes its own get.
    assert built.outcome == "compiled" and built.compiled


def test_removed_op_leaves_the_group_and_its_old_handle_says_so(axpy_copy):
    manifest = axpy_copy.path("kernel.toml")
    manifest.write_text(manifest.read_text() + SECOND_OP)
    group = registry.get(axpy_copy.name)
    assert isinstance(group, registry.OpGroup) and set(group.ops) == {"axpy", "axpy_again"}
    again = group.axpy_again
    x, y = axpy_inputs()
    torch.testing.assert_close(again(x, y, 1.5), 1.5 * x + y)

    manifest.write_text(manifest.read_text().replace(SECOND_OP, ""))
    op = registry.get(axpy_copy.name)
    assert isinstance(op, registry.Op)  # one op again: not a group
    assert op is group.axpy  # the surviving op keeps its handle
    torch.testing.assert_close(op(x, y, 1.5), 1.5 * x + y)
    with pytest.raises(registry.RegistryError, match=rf"op 'axpy_again' .*kernel '{axpy_copy.name}'"):
        again(x, y, 1.5)
    with pytest.raises(registry.RegistryError, match="op 'axpy_again' is no longer part"):
        again(x, y)  # before any complaint about the arguments
    assert "removed" in repr(again)


def test_op_renamed_in_the_manifest_replaces_the_old_one(axpy_copy):
    op = registry.get(axpy_copy.name)
    manifest = axpy_copy.path("kernel.toml")
    manifest.write_text(manifest.read_text().replace(
        'signature = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"',
        'signature = "axpy_again(Tensor x, Tensor y, float alpha) -> Tensor"\nlauncher = "axpy"'))
    renamed = registry.get(axpy_copy.name)
    assert isinstance(renamed, registry.Op) and renamed.name == "axpy_again"
    x, y = axpy_inputs()
    torch.testing.assert_close(renamed(x, y, 1.5), 1.5 * x + y)
    with pytest.raises(registry.RegistryError, match=rf"op 'axpy' .*kernel '{axpy_copy.name}'.*axpy_again"):
        op(x, y, 1.5)


def test_wrong_argument_type_names_the_op_not_the_binding(axpy_copy):
    op = registry.get(axpy_copy.name)
    x = torch.randn(4)
    with pytest.raises(TypeError) as info:
        op(x, x, "a")
    message = str(info.value)
    assert "kreg_" not in message and "::call" not in message
    assert "axpy(Tensor x, Tensor y, float alpha) -> Tensor" in message
    assert "'alpha'" in message and "float" in message and "str" in message
    with pytest.raises(TypeError, match=r"argument 'y' .*Tensor.*int"):
        op(x, 3, 1.0)
