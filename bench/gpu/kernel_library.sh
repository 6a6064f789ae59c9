#!/usr/bin/env bash
# On a GPU machine (after bench/gpu/fetch_deps.sh filled .gpu/): builds every
# library kernel's CUDA backend, one process per kernel (the cache's locks
# keep them apart), then runs bench/kernel_library.py. Results go to $OUT.
set -u
. bench/gpu/env.sh
OUT=${OUT:-$(mktemp -d)}
export REGISTRY_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
for k in softmax rmsnorm layernorm rowmax quantize scale matmul; do
  (python3 -c "import registry; registry.get('$k', device='cuda')" > "$OUT/build_$k.log" 2>&1 || echo "build of $k failed") &
done
wait
grep -il error "$OUT"/build_*.log && tail -n 30 "$OUT"/build_*.log
timeout "${BENCH_TIMEOUT:-420}" python3 bench/kernel_library.py --out "$OUT" 2>&1 | tail -150
