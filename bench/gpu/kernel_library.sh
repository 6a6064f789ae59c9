#!/usr/bin/env bash
# On a GPU machine (after bench/gpu/fetch_deps.sh filled .gpu/): builds every
# library kernel's CUDA backend, one process per kernel (the cache's locks
# keep them apart), then runs bench/kernel_library.py (numerics and bandwidth)
# and bench/op_overhead.py (per-call cost at n = 1, wrapper overhead at the
# largest shape). Results go to $OUT.
#   KERNELS="softmax rmsnorm" SWEEP_ARGS="--sizes 1 17 268435456" bash bench/gpu/kernel_library.sh
set -u
. bench/gpu/env.sh
OUT=${OUT:-$(mktemp -d)}
export REGISTRY_CACHE_DIR=${REGISTRY_CACHE_DIR:-$(mktemp -d)}  # set it to share builds with later steps
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
KERNELS=${KERNELS:-softmax rmsnorm layernorm rowmax quantize scale matmul}
for k in $KERNELS; do
  (python3 -c "import registry; registry.get('$k', device='cuda')" > "$OUT/build_$k.log" 2>&1 || echo "build of $k failed") &
done
wait
grep -il error "$OUT"/build_*.log && tail -n 30 "$OUT"/build_*.log
timeout "${BENCH_TIMEOUT:-420}" python3 bench/kernel_library.py --out "$OUT" --kernels $KERNELS ${SWEEP_ARGS:-} \
  > "$OUT/kernel_library.log" 2>&1
OVERHEAD_KERNELS=$(for k in $KERNELS; do [ "$k" != matmul ] && echo "$k"; done)
timeout "${OVERHEAD_TIMEOUT:-300}" python3 bench/op_overhead.py --out "$OUT" --kernels $OVERHEAD_KERNELS \
  > "$OUT/op_overhead.log" 2>&1
tail -n 120 "$OUT/kernel_library.log"; tail -n 30 "$OUT/op_overhead.log"
