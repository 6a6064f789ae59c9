#!/usr/bin/env bash
# One run on a GPU machine: set up, every test marked gpu, the axpy bandwidth
# benchmark, the edit-loop benchmark beside torch load(), the lab's load()
# anchor, and both notebooks executed on CUDA. Results go to $OUT (a
# temporary folder when unset).
#   bash bench/gpu/run_all.sh            (STEPS="tests bandwidth editloop notebooks")
#   STEPS="fresh anchor" bash bench/gpu/run_all.sh
#   STEPS="nvrtc" bash bench/gpu/run_all.sh   (device code through NVRTC and nvcc -cubin: bench/nvrtc_edit_loop.py, ~5 min)
#   STEPS="cubin nvrtc" bash bench/gpu/run_all.sh (the GPU tests of both cubin paths, then that benchmark)
#   STEPS="remote" bash bench/gpu/run_all.sh  (a teammate's first get through Redis: bench/remote_get.py)
#   STEPS="kernels" bash bench/gpu/run_all.sh (the kernel library: bench/gpu/kernel_library.sh)
#   STEPS="percall" bash bench/gpu/run_all.sh (per-call cost at n = 1 against torch: bench/gpu/percall_n1.sh, ~2 min)
#   STEPS="isolation" bash bench/gpu/run_all.sh (isolated ops: their GPU tests and per-call cost, bench/gpu/isolation.sh)
#   STEPS="tune" bash bench/gpu/run_all.sh    (registry.tune: the row kernels and the NVRTC axpy, bench/tune_*.py)
#   STEPS="gemm" bash bench/gpu/run_all.sh    (kernels/gemm: registry.tune from an empty cache, the re-measure,
#                                              speed beside cuBLAS: bench/gemm.py --tune, ~5 min)
#   STEPS="gemmtests" ...                     (the GPU tests of gemm, launch attributes, header packages,
#                                              device reverts, isolation guards, named returns, pybind checks)
#   STEPS="leftover" ...                      (is a process slower after registry.tune: bench/tune_leftover.py)
#   STEPS="compile edits" ...                 (gemm beside torch.compile max-autotune; gemm's edit loop)
#   STEPS="gemmnvrtc" ...                     (kernels/gemm_nvrtc: its GPU tests, then its edit loop beside
#                                              nvcc -cubin: bench/gemm_edit_loop.py, ~5 min; ONE_UNIT=1: its
#                                              epilogue compiled into the kernels' unit, not linked;
#                                              GEMM_DEFINE=GEMM_EPILOGUE_ROWS=0: the loop and its speed
#                                              with that macro of types.cuh)
#   STEPS="linked" ...                        (a module per kernel on the GPU: tests/test_gpu_linked_modules.py;
#                                              then gemm_nvrtc's edit loop (its epilogue a [cuda] link_sources
#                                              file), checked on the GPU, then its speed: bench/gemm_edit_loop.py
#                                              --speed; LINKED_STEPS=epilogue,restart: ~4 min)
#   STEPS="lto" ...                           (gemm_nvrtc's epilogue as its own unit linked by nvJitLink -lto,
#                                              beside today's NVVM + ptxas; SPLIT="8 0" split too: bench/gemm_lto_link.py, ~3-6 min;
#                                              QUICK=1: the kernels' units only, each kernel linked alone and side by
#                                              side on threads and in processes, ~2-3 min)
#   STEPS="channel" ...                       (isolated CUDA calls on the shared-memory call channel: its GPU
#                                              tests, per-call cost with and without it, bench/isolated_percall.py)
#   STEPS="chain" ...                         (an isolated CUDA call's worker side step by step, one process:
#                                              bench/gpu/guard_chain.cc, ~1 min)
#   STEPS="gemmaot" ...                       (the AOT package of kernels/gemm built by pip with nvcc, bit for bit)
#   STEPS="aotcubin" ...                      (AOT packages that carry a cubin: NVRTC and nvcc -cubin axpy,
#                                              gemm_nvrtc bit for bit; the HF export's CUDA variant, ~5 min)
#   STEPS="trees" ...                         (per call at n = 1 through an older tree's binding and this one's,
#                                              OLD=checkout: bench/gpu/percall_trees.sh, ~3.5 min)
#   STEPS="shims" ...                         (what each stable C shim a fast call makes costs: bench/stable_shim_costs.py)
#   STEPS="probes" ...                        (can a parent's stream wait on an isolated worker's kernel and still be
#                                              released when the worker dies: bench/gpu/ipc_event_probe.py and
#                                              bench/gpu/flag_wait_probe.py, ~1 min)
#   STEPS="floor" ...                         (an isolated CUDA call's cost by its structure alone, two processes and
#                                              no registry: bench/gpu/async_order_probe.py; then the registry's
#                                              beside it, bench/isolated_percall.py, ~2 min)
set -u
. bench/gpu/env.sh
OUT=${OUT:-$(mktemp -d)}
STEPS=${STEPS:-tests bandwidth editloop notebooks}
export REGISTRY_CACHE_DIR=${REGISTRY_CACHE_DIR:-$(mktemp -d)} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
lscpu > "$OUT/lscpu.txt" 2>&1
python3 -c "import torch; print('torch', torch.__version__)" >> "$OUT/gpu.txt"
for step in $STEPS; do
  case $step in
    tests) { echo "# $(date -u '+%F %H:%M UTC'), $(head -2 "$OUT/gpu.txt" | tail -1). Command: python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests"
             python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests 2>&1; } | tee "$OUT/gpu_tests.txt" | tail -60 ;;
    bandwidth) python3 bench/axpy_bandwidth.py --out "$OUT" 2>&1 | tail -12 ;;
    editloop) python3 bench/edit_loop.py --device cuda --reps "${REPS:-3}" --torch-reps "${TORCH_REPS:-2}" --out "$OUT" 2>&1 | tail -16 ;;
    kernels) OUT="$OUT" REGISTRY_CACHE_DIR="$REGISTRY_CACHE_DIR" bash bench/gpu/kernel_library.sh 2>&1 | tail -60 ;;
    percall) OUT="$OUT" REGISTRY_CACHE_DIR="$REGISTRY_CACHE_DIR" bash bench/gpu/percall_n1.sh 2>&1 | tail -40 ;;
    isolation) OUT="$OUT/isolation" bash bench/gpu/isolation.sh 2>&1 | tail -30 ;;
    tune) python3 bench/tune_rows.py --device cuda --out "$OUT" 2>&1 | tail -30
          python3 bench/tune_nvrtc.py --out "$OUT" 2>&1 | tail -20 ;;
    nvrtc) PYTHONUNBUFFERED=1 python3 bench/nvrtc_edit_loop.py --device cuda --reps "${REPS:-5}" \
             --torch-reps "${TORCH_REPS:-2}" --out "$OUT" 2>&1 | tee "$OUT/nvrtc_edit_loop.log" | grep '^step ' ;;
    cubin) python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gpu_device_paths.py tests/test_gpu_cubin_reuse_and_devices.py \
             2>&1 | tee "$OUT/gpu_cubin_tests.txt" | tail -40 ;;
    fresh) python3 bench/fresh_get.py --device cuda --reps "${FRESH_REPS:-9}" --out "$OUT" 2>&1 | tail -2 ;;
    remote) python3 bench/remote_get.py --device cuda --reps "${REMOTE_REPS:-7}" --out "$OUT" 2>&1 | tail -3 ;;
    anchor) OUT="$OUT" python3 bench/anchor/torch_load_anchor.py > "$OUT/anchor.txt" 2>&1; tail -4 "$OUT/anchor.txt" ;;
    probes) timeout 150 python3 bench/gpu/ipc_event_probe.py 2>&1 | tee "$OUT/ipc_event_probe.txt" | grep '^[#{]'
            timeout 120 python3 bench/gpu/flag_wait_probe.py 2>&1 | tee "$OUT/flag_wait_probe.txt" | grep '^[#{]' ;;
    floor) timeout 200 python3 bench/gpu/async_order_probe.py 2>&1 | tee "$OUT/async_order_probe.txt" | grep '^[#{]'
           timeout 200 python3 bench/isolated_percall.py --device cuda --sizes 1 268435456 --rounds 15 --big-calls 40 \
             2>&1 | grep -v '^  ' | tee "$OUT/isolated_percall.txt" ;;
    lto) timeout "${LTO_S:-300}" python3 bench/gemm_lto_link.py --out "$OUT" ${SPLIT:+--split $SPLIT} ${QUICK:+--quick} \
           2>&1 | tail -16 ;;
    gemm) timeout "${GEMM_S:-360}" python3 bench/gemm.py --out "$OUT" --tune 2>&1 | tee "$OUT/gemm.log" | grep -v '^{' | tail -30 ;;
    gemmtests) { echo "# $(date -u '+%F %H:%M UTC'), $(head -2 "$OUT/gpu.txt" | tail -1)"
                 timeout "${GEMMTESTS_S:-200}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gemm.py \
                   tests/test_gpu_launch_attributes.py tests/test_gpu_header_packages.py tests/test_device_macro_revert.py \
                   tests/test_isolated_gpu.py tests/test_named_returns.py tests/test_message_prefixes.py \
                   tests/test_pybind_checks.py tests/test_arch_specific.py 2>&1; } | tee "$OUT/gpu_new_tests.txt" | tail -30 ;;
    leftover) timeout "${LEFTOVER_S:-150}" python3 bench/tune_leftover.py --out "$OUT" --rounds 20 2>&1 | tail -16 ;;
    compile) timeout "${COMPILE_S:-400}" python3 bench/gemm.py --out "$OUT/compile" --compile 2>&1 | grep -v '^{' | tail -12 ;;
    edits) timeout "${EDITS_S:-300}" python3 bench/gemm.py --out "$OUT/edits" --skip-speed --edits "${EDITS:-3}" 2>&1 | tail -12 ;;
    gemmnvrtc) timeout "${GEMMNVRTC_TESTS_S:-300}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider \
                 tests/test_gpu_gemm_nvrtc.py 2>&1 | tee "$OUT/gpu_gemm_nvrtc_tests.txt" | tail -12
               timeout "${GEMMNVRTC_S:-600}" python3 bench/gemm_edit_loop.py --device cuda --edits "${EDITS:-5}" \
                 ${ONE_UNIT:+--one-unit} ${GEMM_DEFINE:+--speed --define "$GEMM_DEFINE"} --out "$OUT" 2>&1 \
                 | tee "$OUT/gemm_edit_loop.log" | tail -20 ;;
    linked) timeout 180 python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gpu_linked_modules.py 2>&1 \
              | tee "$OUT/gpu_linked_modules_tests.txt" | tail -6
            timeout "${LINKED_S:-500}" python3 bench/gemm_edit_loop.py --device cuda --edits "${EDITS:-3}" \
              --speed --steps "${LINKED_STEPS:-body,epilogue,restart,nvcc}" --out "$OUT" 2>&1 | tee "$OUT/gemm_edit_loop_linked.log" | tail -14 ;;
    aotcubin) timeout "${AOTCUBIN_S:-420}" python3 -m pytest -m gpu -p no:cacheprovider --timeout 240 --tb=short -rfEs \
                -k "cubin_package or aot or cuda_variant" tests/test_aot.py tests/test_gpu_gemm_nvrtc.py \
                tests/test_hf_export.py 2>&1 | tee "$OUT/gpu_aot_cubin_tests.txt" | tail -12 ;;
    channel) timeout "${CHANNEL_TESTS_S:-240}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider --timeout 120 \
               tests/test_isolated_gpu.py tests/test_isolated_channel.py 2>&1 | tee "$OUT/gpu_channel_tests.txt" | tail -20
             for mode in 0 1; do
               REGISTRY_ISOLATE_CUDA_CHANNEL=$mode timeout "${CHANNEL_BENCH_S:-120}" python3 bench/isolated_percall.py \
                 --device cuda --sizes 1 268435456 --rounds "${ROUNDS:-20}" --out "$OUT/channel-$mode" 2>&1 \
                 | grep -v '^  ' | tee "$OUT/channel-$mode.txt"
             done ;;
    chain) nvcc -cubin -arch=sm_90 -o "$OUT/guard_chain.cubin" bench/gpu/guard_chain_kernels.cu \
             && /usr/bin/g++ -O2 -std=c++17 -I/usr/local/cuda/include bench/gpu/guard_chain.cc \
                  -L/usr/local/cuda/lib64/stubs -lcuda -o "$OUT/guard_chain" \
             && taskset -c 2 "$OUT/guard_chain" "$OUT/guard_chain.cubin" 2>&1 | tee "$OUT/guard_chain.txt"
           rm -f "$OUT/guard_chain" "$OUT/guard_chain.cubin" ;;
    gemmaot) timeout "${GEMMAOT_S:-300}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider --timeout 280 \
               -k aot_package tests/test_gemm.py 2>&1 | tee "$OUT/gpu_gemm_aot_test.txt" | tail -12 ;;
    trees) OLD="${OLD:-.gpu/old-tree}" OUT="$OUT/trees" timeout "${TREES_S:-400}" bash bench/gpu/percall_trees.sh 2>&1 \
             | tail -60 ;;
    shims) taskset -c 3 python3 bench/stable_shim_costs.py 2>&1 | tee "$OUT/stable_shim_costs.txt" ;;
    notebooks) REGISTRY_SWEEP_FIGURE="$OUT/axpy_sweep_h200.png" python3 bench/gpu/run_notebooks.py "$OUT" 2>&1 | tail -20 ;;
  esac
done
