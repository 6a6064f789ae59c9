#!/usr/bin/env bash
# One GPU-machine session: set up, the GPU test suite, the axpy bandwidth
# benchmark and the edit-loop benchmark beside torch load(). Results go to
# $OUT (the device tool brings them back) and a short table is printed last.
#   bash bench/gpu/run_all.sh
set -u
. bench/gpu/env.sh
OUT=${OUT:-$(mktemp -d)}
export REGISTRY_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gpu_ops.py 2>&1 | tee "$OUT/gpu_tests.txt" | tail -45
python3 bench/axpy_bandwidth.py --out "$OUT" 2>&1 | tail -12
python3 bench/edit_loop.py --device cuda --reps "${REPS:-3}" --out "$OUT" 2>&1 | tail -16
