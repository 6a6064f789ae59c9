#!/bin/bash
# The shared binding carried between machines, from the repository root on the
# GPU machine after `. bench/gpu/env.sh`. .gpu/carried-cache is a cache a
# development machine filled (torch 2.14.1, Python 3.11, g++ 12, no GPU):
#   CUDA_HOME=/usr/local/cuda TORCH_CUDA_ARCH_LIST=9.0 REGISTRY_CACHE_DIR=$PWD/.gpu/carried-cache \
#     python -m registry build axpy --device cuda      (and --device cpu)
# Here (torch 2.11, Python 3.12, another g++): ops of two signatures on both
# backends run on those bindings with no binding compile, then GPU tests run on
# them (REGISTRY_TEST_SEED_CACHE); last, this machine's own bindings are built
# into $OUT/h200-cache for the other direction.
set -u
OUT=${OUT:-$(mktemp -d)}
SEED=.gpu/carried-cache
cache=$(mktemp -d) && cp -r "$SEED/." "$cache"
REGISTRY_CACHE_DIR=$cache python3 - "$SEED" <<'PY' 2>&1 | tee "$OUT/carried_binding.txt"
import hashlib, pathlib, sys, torch, registry
from registry.builder import step
seed = pathlib.Path(sys.argv[1])
digest = lambda p: hashlib.sha256(pathlib.Path(p).read_bytes()).hexdigest()[:16]
carried = {p.name: digest(p) for p in seed.rglob("kreg_binding_*.so")}
x, y = torch.randn(1 << 20), torch.randn(1 << 20)
for device in ("cuda", "cpu"):
    axpy, softmax = registry.get("axpy", device=device), registry.get("softmax", device=device)
    xd, yd = x.to(device), y.to(device)
    assert torch.equal(axpy(xd, yd, 2.0).cpu(), (2.0 * x + y)), device
    z = torch.randn(64, 33, device=device)
    assert torch.allclose(softmax(z), torch.softmax(z, -1), atol=1e-6), device
    path = registry.status("axpy", device=device).artifacts["binding axpy"]
    name = pathlib.Path(path).name
    print(f"{device}: binding {name} sha256 {digest(path)} (carried: {carried.get(name, 'none of this name')})")
print("torch", torch.__version__, "python", sys.version.split()[0])
print("compiles run:", step.builds_run)
print("shared bindings compiled:", sum(kind == "binding" for _, kind in step.builds_run))
PY
# Tests that take the session's cache start from a copy of the seed; the others use REGISTRY_CACHE_DIR: another copy.
tests_cache=$(mktemp -d) && cp -r "$SEED/." "$tests_cache"
REGISTRY_CACHE_DIR=$tests_cache REGISTRY_TEST_SEED_CACHE=$PWD/$SEED timeout "${CARRIED_TESTS_S:-330}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider \
  --timeout 150 tests/test_isolated_gpu.py tests/test_gpu_ops.py tests/test_named_returns.py \
  tests/test_message_prefixes.py tests/test_lab_tests.py 2>&1 | tee "$OUT/carried_binding_tests.txt" | tail -8
mine=$(mktemp -d)
for device in cuda cpu; do
  REGISTRY_CACHE_DIR=$mine python3 -m registry build axpy --device $device 2>&1 | grep binding
done
mkdir -p "$OUT/h200-cache" && cp -r "$mine/." "$OUT/h200-cache/"
