#!/usr/bin/env bash
# The next session's H200 calls (device tool, `.whl` carried; output under $OUT; timeout_s 600;
# fire each as soon as the previous returns, while the machine is warm):
#   (default)  merge_states' vector kernel (-DEMBER_MERGE_VEC=1, never run on a GPU yet): its GPU
#              tests, then the harness rows against the default kernel and FlashInfer (issue 4:
#              FlashInfer 28.58 against 81.92 us at 4096 x 2 x 32 x 128 bf16 in session 9); the
#              softmax bulk-copy ring (-DEMBER_SOFTMAX_BULK=1, 2x slower in session 9) under
#              Nsight Compute — grid size, time, DRAM, stalls — to tell which of notes/act.md's
#              three explanations holds; the RoPE table at 1-512 tokens with the new default
#   SUITE=1    the whole GPU suite (430 s at 296deba; not run in session 9)
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next11.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
if [ "${SUITE:-0}" = 1 ]; then
  timeout 560 python3 -m pytest -q tests -p no:cacheprovider --durations=15 > $OUT/tests_all.txt 2>&1
  echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^[0-9.]+s (call|setup)" $OUT/tests_all.txt | head -40
  grep -E "^E " $OUT/tests_all.txt | head -30
  exit 0
fi
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f2-8,11,13-; }
tests() { local tag=$1 t=$2; shift 2; timeout $t python3 -m pytest -q "$@" -p no:cacheprovider > $OUT/tests_$tag.txt 2>&1; echo "tests $tag {${EMBER_EXTRA_CUDA_FLAGS:-}} rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^E " $OUT/tests_$tag.txt | head -12; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_VEC=1 tests merge_vec 90 tests/ops/test_decode.py -k merge
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_VEC=1 bench merge_vec 40 merge_states --backends ember
bench merge_states 150 merge_states --backends ember,flashinfer
M=gpu__time_duration.sum,launch__grid_size,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_BULK=1 timeout 90 ncu --clock-control none --kernel-name regex:softmax --launch-skip 2 --launch-count 1 --metrics $M python3 -c "
import torch, ember
x = 4 * torch.randn(128, 128256, device='cuda')
for _ in range(4): ember.softmax(x, 0.7)
torch.cuda.synchronize()" > $OUT/ncu_bulk.txt 2>&1; echo "== ncu softmax bulk rc $?"; grep -E "softmax|gpu__|grid|dram|warps|issue|stalled" $OUT/ncu_bulk.txt | head -14
bench rope_small 120 rope --backends ember,flashinfer --shapes 1x32x8x128,64x32x8x128,512x32x8x128 --timing cuda_graph
