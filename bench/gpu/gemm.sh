#!/usr/bin/env bash
# kernels/gemm on the GPU machine, in one run: its GPU tests, then registry.tune
# from an empty cache and ccache with the re-measure (bench/gemm.py --tune),
# then speed beside cuBLAS; STEPS picks parts ("tests tune compile edits").
# Results go to $OUT. Source bench/gpu/env.sh first (it installs the carried
# nvidia-cutlass wheel with the other wheels in .gpu/wheels).
set -u
OUT=${OUT:-$(mktemp -d)}
STEPS=${STEPS:-tests tune}
export PYTHONUNBUFFERED=1
export REGISTRY_CACHE_DIR=${REGISTRY_CACHE_DIR:-$(mktemp -d)} CCACHE_DIR=${CCACHE_DIR:-$(mktemp -d)}
for step in $STEPS; do
  case $step in
    tests) python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gemm.py 2>&1 | tee "$OUT/gemm_gpu_tests.txt" | tail -25 ;;
    tune) python3 bench/gemm.py --out "$OUT" --tune 2>&1 | tee "$OUT/gemm_tune.log" | tail -30 ;;
    compile) python3 bench/gemm.py --out "$OUT/compile" --compile 2>&1 | tee "$OUT/gemm_compile.log" | tail -12 ;;
    edits) python3 bench/gemm.py --out "$OUT/edits" --skip-speed --edits "${EDITS:-3}" 2>&1 | tee "$OUT/gemm_edits.log" | tail -12 ;;
  esac
done
