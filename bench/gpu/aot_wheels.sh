#!/usr/bin/env bash
# AOT wheels built on one machine, used on another torch and Python
# (registry/tools/aot_wheel.py). On the development machine (no GPU):
#   mkdir -p .gpu/aot-wheels/kernels && cp -r kernels/axpy_nvrtc .gpu/aot-wheels/kernels/axpy_nvcc_cubin &&
#   sed -i 's/compiler = "nvrtc"/compiler = "nvcc-cubin"/' .gpu/aot-wheels/kernels/axpy_nvcc_cubin/kernel.toml
#   for k in axpy axpy_nvrtc layernorm scale axpy_nvcc_cubin; do
#     CUDA_HOME=/usr/local/cuda TORCH_CUDA_ARCH_LIST=9.0 REGISTRY_KERNELS_PATH=.gpu/aot-wheels/kernels \
#       python -m registry aot $k --wheel .gpu/aot-wheels; done
# then on the GPU machine (.gpu carried), after `. bench/gpu/env.sh`:
#   OUT=DIR bash bench/gpu/aot_wheels.sh
# The carried wheels are installed with pip and used in a fresh interpreter with no
# registry, on CUDA and on the CPU, and compared bit for bit with this machine's own
# registry builds; then the wheels this machine exports itself, the same way, a
# wheel of each cubin path, and the Hugging Face stable-ABI layout's CUDA variant.
set -u
OUT=${OUT:-$(mktemp -d)}
export REGISTRY_CACHE_DIR=${REGISTRY_CACHE_DIR:-$(mktemp -d)} PYTHONUNBUFFERED=1
{ echo "# $(date -u '+%F %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)," \
       "torch $(python3 -c 'import torch; print(torch.__version__)'), Python $(python3 -c 'import sys; print(sys.version.split()[0])')." \
       "Wheels: $(ls .gpu/aot-wheels | tr '\n' ' ')"
  echo "# Command: KREG_CARRIED_WHEELS=.gpu/aot-wheels python3 -m pytest -m gpu -v -s -rs -p no:cacheprovider tests/test_aot_wheel.py tests/test_hf_stable.py"
  KREG_CARRIED_WHEELS=.gpu/aot-wheels timeout "${WHEELS_S:-400}" python3 -m pytest -m gpu -v -s -rs -p no:cacheprovider \
    tests/test_aot_wheel.py tests/test_hf_stable.py 2>&1; } | tee "$OUT/gpu_aot_wheel_tests.txt" | grep -v "^W1204" | tail -40
