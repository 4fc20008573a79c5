#!/usr/bin/env bash
# The first H200 call of the next session (device tool, `.whl` carried; output under $OUT; run
# with timeout_s 600): the persistent softmax A/B (-DEMBER_SOFTMAX_PERSISTENT=1: its tests, then
# both builds against torch eager), the filters' relative-digit A/B (-DEMBER_FILTER_RELATIVE=1,
# and with -DEMBER_FILTER_LEAN0=1: tests, three rows each build) and an Nsight Compute profile of
# the top-p filter kernel (stall reasons, issue rate, DRAM rate). Then, in a second call, the
# whole GPU suite (cut short in session 7): `SUITE=1 bash tools/h200_next8.sh`. Peers' full
# tables: tools/h200_issue5.sh act|sampling.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next8.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
if [ "${SUITE:-0}" = 1 ]; then
  timeout 560 python3 -m pytest -q tests -p no:cacheprovider --durations=15 > $OUT/tests_all.txt 2>&1
  echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^[0-9.]+s (call|setup)" $OUT/tests_all.txt | head -40
  exit 0
fi
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f2-9,14-; }
echo "== softmax: persistent A/B"
P=-DEMBER_SOFTMAX_PERSISTENT=1
EMBER_EXTRA_CUDA_FLAGS=$P timeout 90 python3 -m pytest -q -x tests/ops/test_sampling.py -p no:cacheprovider > $OUT/tests_persistent.txt 2>&1; echo "tests persistent rc $?"; tail -2 $OUT/tests_persistent.txt
bench softmax 60 softmax --backends ember,torch --shapes 128x128256,512x32000
EMBER_EXTRA_CUDA_FLAGS=$P bench softmax_persistent 60 softmax --backends ember --shapes 128x128256,512x32000
echo "== filters: digits relative to the cut (-DEMBER_FILTER_RELATIVE=1)"
R=-DEMBER_FILTER_RELATIVE=1
EMBER_EXTRA_CUDA_FLAGS=$R timeout 90 python3 -m pytest -q -x tests/ops/test_sampling_filters.py -p no:cacheprovider > $OUT/tests_relative.txt 2>&1; echo "tests relative rc $?"; tail -2 $OUT/tests_relative.txt
RL="$R -DEMBER_FILTER_LEAN0=1"
EMBER_EXTRA_CUDA_FLAGS=$RL timeout 90 python3 -m pytest -q -x tests/ops/test_sampling_filters.py -p no:cacheprovider > $OUT/tests_relative_lean.txt 2>&1; echo "tests relative+lean0 rc $?"; tail -2 $OUT/tests_relative_lean.txt
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_k_sampling_from_probs; do
  bench $op 40 $op --backends ember --shapes 128x128256,1x128256
  EMBER_EXTRA_CUDA_FLAGS=$R bench ${op}_relative 40 $op --backends ember --shapes 128x128256,1x128256
  EMBER_EXTRA_CUDA_FLAGS=$RL bench ${op}_relative_lean 40 $op --backends ember --shapes 128x128256
done
echo "== ncu: where the top-p filter kernel's time goes (128 x 128 256 fp32)"
S=smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,launch__registers_per_thread,launch__occupancy_limit_shared_mem
timeout 120 ncu --clock-control none --kernel-name regex:filter_kernel --launch-skip 2 --launch-count 1 --metrics $M,$S python3 -c "
import torch, ember
p = torch.softmax(4 * torch.randn(128, 128256, device='cuda'), -1)
for _ in range(4): ember.top_p_sampling_from_probs(p, 0.9)
torch.cuda.synchronize()" > $OUT/ncu_top_p.txt 2>&1; echo "ncu rc $?"; grep -E "filter_kernel|gpu__time|inst_exec|issue_active|dram__|warps_active|bank_conf|registers|occupancy|stalled" $OUT/ncu_top_p.txt | head -30
