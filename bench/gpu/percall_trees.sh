#!/usr/bin/env bash
# Per call at n = 1 through two trees in one run (bench/percall_n1.py, the same
# script and kernels for both): OLD, a checkout of an older tree (for instance
# the one before the stable-ABI binding, `git archive REV | tar -x -C DIR`), and
# this one. Each tree gets its own core, cache and builds; then they take turns,
# RUNS times each, swapping which goes first. From the repository root on the
# GPU machine, after `. bench/gpu/env.sh`:
#   OLD=.gpu/old-tree OUT=dir bash bench/gpu/percall_trees.sh
set -u
OUT=${OUT:-$(mktemp -d)}
OLD=$(cd "${OLD:?OLD=a checkout of the older tree}" && pwd)
KERNELS=${KERNELS:-softmax scale layernorm axpy}
RUNS=${RUNS:-2}
DEVICE=${DEVICE:-cuda}
NEW=$PWD
mkdir -p "$OUT"
[ -e "$OLD/.gpu" ] || ln -s "$NEW/.gpu" "$OLD/.gpu"
(cd "$OLD" && . bench/gpu/env.sh) || { echo "the old tree's core did not build"; exit 1; }
for tree in old new; do
  root=$([ $tree = old ] && echo "$OLD" || echo "$NEW")
  (cd "$root" && PYTHONPATH="$root:$PYTHONPATH" REGISTRY_CACHE_DIR="$OUT/cache-$tree" \
     KERNELS="$KERNELS" STAGE=build OUT="$OUT/build-$tree" bash bench/gpu/percall_n1.sh 2>&1 | tail -3)
done
for run in $(seq "$RUNS"); do
  order=$([ $((run % 2)) = 1 ] && echo "old new" || echo "new old")
  for tree in $order; do
    root=$([ $tree = old ] && echo "$OLD" || echo "$NEW")
    echo "## $tree, run $run"
    (cd "$root" && PYTHONPATH="$root:$PYTHONPATH" REGISTRY_CACHE_DIR="$OUT/cache-$tree" PYTHONUNBUFFERED=1 \
       python3 bench/percall_n1.py --device "$DEVICE" --kernels $KERNELS --out "$OUT/$tree-$run" \
       --note "$tree tree, run $run" ${PERCALL_ARGS:-} 2>&1 | grep -E "^[a-z_]+ +[a-z_0-9]+ +(float|bfloat)")
  done
done | tee "$OUT/percall_trees.txt"
rm -rf "$OUT"/cache-* "$OUT"/build-*
