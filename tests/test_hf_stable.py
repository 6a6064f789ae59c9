"""The Hugging Face kernels layout on torch's stable ABI (registry/tools/hf_stable.py):
torch-stable-abi211 variants, loaded by the kernels package itself with
get_local_kernel, offline, in a fresh interpreter with no registry, and
compared bit for bit with the registry's ops."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import registry
from registry.errors import RegistryError
from registry.tools.hf_stable import export_hf_stable
from wheel_use import inputs
from aot_install import offline_hub_env

pytestmark = pytest.mark.usefixtures("cache_root")

# In the fresh interpreter: the variant kernels picks for this torch, each op on
# wheel_use's inputs, saved for the parent to compare.
LOAD = """
import sys
from pathlib import Path

import kernels
import torch

sys.path.insert(0, sys.argv[3])
from wheel_use import inputs

repo, kernel_name, out, device = Path(sys.argv[1]), sys.argv[2], sys.argv[4], sys.argv[5]
kernel = kernels.get_local_kernel(repo, backend=device)
variant = Path(kernel.__file__).parent.parent
op = getattr(kernel, {"scale": "scale_"}.get(kernel_name, kernel_name))
results = []
for args in inputs(kernel_name, device):
    got = op(*args)
    got = args[0] if got is None else got
    results.append(tuple(t.cpu() for t in got) if isinstance(got, tuple) else got.cpu())
if kernel_name != "scale":  # (an in-place op is checked by its result above)
    traced = torch.compile(lambda *a: op(*a), fullgraph=True)(*args)
    for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (traced, results[-1]))):
        assert torch.equal(a.cpu(), b), "torch.compile differs"
assert "registry" not in sys.modules, "the variant imported the JIT registry"
torch.save(results, out)
print("HF-STABLE-OK", variant.name)
"""


CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                        reason="needs a CUDA device")])


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("kernel", ["axpy", "layernorm", "scale"])
def test_a_stable_variant_loads_offline_with_kernels_and_matches_the_registry_bit_for_bit(kernel, device, tmp_path):
    variants = export_hf_stable(kernel, tmp_path / "hub", backends=[device])
    flavour = "cpu" if device == "cpu" else f"cu{torch.version.cuda.replace('.', '')[:3]}"
    assert [v.name for v in variants] == [f"torch-stable-abi211-{flavour}-{os.uname().machine}-linux"]
    out = tmp_path / "out.pt"
    done = subprocess.run([sys.executable, "-s", "-c", LOAD, str(tmp_path / "hub"), kernel,
                           str(Path(__file__).parent), str(out), device],
                          capture_output=True, text=True, env=offline_hub_env(tmp_path), timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert f"HF-STABLE-OK {variants[0].name}" in done.stdout, done.stdout
    op = registry.get(kernel, device=device)
    op = op if isinstance(op, registry.Op) else getattr(op, kernel)
    for args, got in zip(inputs(kernel, device), torch.load(out)):
        want = op(*args)
        want = args[0] if want is None else want
        for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
            assert torch.equal(a, b.cpu()), f"{kernel}: the variant's result differs from the registry op's"


def test_a_folder_the_registry_did_not_write_is_not_replaced(tmp_path):
    foreign = tmp_path / "build" / f"torch-stable-abi211-cpu-{os.uname().machine}-linux"
    (foreign / "axpy").mkdir(parents=True)
    (foreign / "axpy" / "__init__.py").write_text("# someone's own build\n")
    with pytest.raises(RegistryError, match="is not a variant the registry exported"):
        export_hf_stable("axpy", tmp_path, backends=["cpu"])
    assert (foreign / "axpy" / "__init__.py").read_text() == "# someone's own build\n"
