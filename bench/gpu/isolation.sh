#!/bin/bash
# Isolated ops on the GPU machine, from the repository root after `. bench/gpu/env.sh`:
# the GPU tests (device faults, the parent's context after each, checked memcheck
# file:line, stream order), the CPU fault tests on an idle machine, then the
# per-call cost beside the normal op (n = 1 and 2^28 on CUDA, n = 1 on the CPU).
set -u
OUT=${OUT:-bench/results/isolation-gpu}
mkdir -p "$OUT"
python3 -m pytest -q -p no:cacheprovider tests/test_isolated_gpu.py tests/test_isolated_faults.py \
  tests/test_isolated_checked.py 2>&1 | tee "$OUT/tests.txt" | tail -15
python3 bench/isolated_percall.py --device cuda --sizes 1 268435456 --out "$OUT/cuda" 2>&1 | grep -v '^  ' | tee "$OUT/cuda.txt"
python3 bench/isolated_percall.py --device cpu --sizes 1 --out "$OUT/cpu" 2>&1 | grep -v '^  ' | tee "$OUT/cpu.txt"
