#!/usr/bin/env bash
# Per-call cost at n = 1 on the GPU (bench/percall_n1.py): builds every kernel
# it times first, in parallel (first builds of bindings take ~20-30 s each),
# then times them in one process. After `. bench/gpu/env.sh`:
#   OUT=dir bash bench/gpu/percall_n1.sh
#   KERNELS="softmax axpy_nvrtc" PERCALL_ARGS="--rounds 60" OUT=dir bash bench/gpu/percall_n1.sh
#   STAGE=build (only the builds) / STAGE=bench (only the timing)
set -u
OUT=${OUT:-$(mktemp -d)}
KERNELS=${KERNELS:-softmax rmsnorm layernorm rowmax quantize scale matmul axpy axpy_nvrtc axpy_cubin}
STAGE=${STAGE:-all}
BENCH=${BENCH:-bench/percall_n1.py}
mkdir -p "$OUT"
# axpy_cubin has no folder of its own (axpy_nvrtc through nvcc -cubin, bench/derived_kernels.py):
# written once to a folder every process below searches first, the same for STAGE=build and STAGE=bench.
DERIVED=${TMPDIR:-/tmp}/kreg-derived-kernels  # bench/derived_kernels.py's DEFAULT_ROOT
python3 bench/derived_kernels.py "$DERIVED" $KERNELS
export REGISTRY_KERNELS_PATH="$DERIVED${REGISTRY_KERNELS_PATH:+:$REGISTRY_KERNELS_PATH}"
if [ "$STAGE" != bench ]; then
  start=$(date +%s)
  for k in $KERNELS; do
    timeout "${BUILD_TIMEOUT:-300}" python3 -c "import registry; registry.get('$k', device='cuda')" \
      > "$OUT/build_$k.log" 2>&1 || echo "build of $k failed: $(tail -3 "$OUT/build_$k.log")" &
  done
  wait
  echo "built $KERNELS in $(( $(date +%s) - start )) s"
  # What each build printed last, here rather than a file a kernel (what comes back from a GPU machine is few files).
  for k in $KERNELS; do echo "== build of $k:"; tail -3 "$OUT/build_$k.log"; rm -f "$OUT/build_$k.log"; done
fi
if [ "$STAGE" != build ]; then
  PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-240}" python3 "$BENCH" --out "$OUT" --kernels $KERNELS \
    ${PERCALL_ARGS:-} 2>&1
fi
