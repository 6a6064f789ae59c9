"""Any folder holds a kernel: its name is derived from the folder's (or set
with `name`), get() takes either, and a folder that cannot be a kernel is
listed with the reason. On the CPU."""
from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch

import registry
from conftest import CHECKOUT, KernelCopy

_counter = itertools.count()


def _lab(kernels_root, folder_stem: str) -> KernelCopy:
    """A copy of axpy in a folder named as a curriculum names its labs."""
    return KernelCopy(kernels_root, "axpy", f"{folder_stem}-{next(_counter)}")


def test_a_lab_folder_is_a_kernel_by_its_folders_name_and_its_derived_name(kernels_root):
    lab = _lab(kernels_root, "lab-02-axpy")
    derived = lab.name.replace("-", "_")
    op = registry.get(lab.name, device="cpu")
    assert op.kernel == derived
    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(op(x, y, 2.0), 2.0 * x + y)
    assert registry.get(derived, device="cpu") is op  # one kernel, one handle, by either name
    assert registry.get(lab.name, device="cpu") is op
    assert registry.status(lab.name).kernel == derived
    assert f"kernel {derived} (folder {lab.name}) [cpu]" in str(registry.status(derived))
    listed = {info.name: info for info in registry.list()}
    assert listed[derived].folder == lab.name and listed[derived].problem == ""
    assert f"{derived} (folder {lab.name})" in str(listed[derived])


def test_a_name_key_names_the_kernel(kernels_root):
    lab = _lab(kernels_root, "Lab 03 (month 3)")
    name = f"lab03_m3_{next(_counter)}"
    lab.edit("kernel.toml", "format = 1", f'format = 1\nname = "{name}"')
    assert registry.get(name, device="cpu").kernel == name
    assert registry.get(lab.name, device="cpu").kernel == name


def test_two_folders_giving_one_name_are_an_error_naming_both(kernels_root):
    first = _lab(kernels_root, "lab-04-axpy")
    second = KernelCopy(kernels_root, "axpy", first.name.replace("-", "_"))
    with pytest.raises(registry.KernelNotFoundError) as info:
        registry.get(second.name, device="cpu")
    assert str(first.dir) in str(info.value) and str(second.dir) in str(info.value)
    assert "rename one folder" in str(info.value)
    problems = [i for i in registry.list() if i.problem and i.folder in (first.name, second.name)]
    assert len(problems) == 2


def test_a_folder_that_cannot_be_a_kernel_is_listed_with_why(kernels_root, tmp_path):
    folder = "lab-" + "x" * 70
    lab = KernelCopy(kernels_root, "axpy", folder)
    with pytest.raises(registry.RegistryError) as info:
        registry.get(folder, device="cpu")
    assert str(lab.dir) in str(info.value) and 'set name = "..." in kernel.toml' in str(info.value)
    listed = [i for i in registry.list() if i.folder == folder]
    assert len(listed) == 1 and "set name" in listed[0].problem
    import os

    env = dict(os.environ, REGISTRY_KERNELS_PATH=str(kernels_root))
    done = subprocess.run([sys.executable, "-m", "registry", "list"], env=env, cwd=str(CHECKOUT),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{folder}/ is not a kernel: its name gives no kernel name" in done.stdout


def test_not_found_says_the_name_rule(kernels_root):
    with pytest.raises(registry.KernelNotFoundError) as info:
        registry.get("no-such-lab")
    assert "[a-z0-9_]" in str(info.value) and "folder's name" in str(info.value)
