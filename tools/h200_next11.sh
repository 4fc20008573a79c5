#!/usr/bin/env bash
# (Ran in session 10 at 58c8e6e; EMBER_SOFTMAX_BULK, which it profiles, was removed in cf6ed91,
# and MERGE_VEC / SOFTMAX_NARROW are now on by default — check out 58c8e6e to rerun it.)
# The next session's H200 calls (device tool, `.whl` carried; output under $OUT; timeout_s 600;
# fire each as soon as the previous returns, while the machine is warm):
#   (default)  merge_states' vector kernel (-DEMBER_MERGE_VEC=1, never run on a GPU yet): its GPU
#              tests, then the harness rows against the default kernel and FlashInfer (issue 4:
#              FlashInfer 28.58 against 81.92 us at 4096 x 2 x 32 x 128 bf16 in session 9); the
#              softmax bulk-copy ring (-DEMBER_SOFTMAX_BULK=1, 2x slower in session 9) under
#              Nsight Compute — grid size, time, DRAM, stalls — to tell which of notes/act.md's
#              three explanations holds; clusters of 2 or 4 for mid-size vocabularies
#              (-DEMBER_SOFTMAX_NARROW=1: tests, then A/B with torch.compile at 512 x 32 000)
#   ROPE=1     test_rope.py (its test of rope_static_kernel at heads of 64 and 256 is new,
#              unrun) and the RoPE table at 1-512 tokens with the new default
#   SUITE=1    the whole GPU suite (430 s at 296deba; not run in session 9)
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next11.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
if [ "${ROPE:-0}" = 1 ]; then
  tests rope 120 tests/ops/test_rope.py
  bench rope_small 120 rope --backends ember,flashinfer --shapes 1x32x8x128,64x32x8x128,512x32x8x128 --timing cuda_graph
  exit 0
fi
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_VEC=1 tests merge_vec 90 tests/ops/test_decode.py -k merge
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_VEC=1 bench merge_vec 40 merge_states --backends ember
bench merge_states 150 merge_states --backends ember,flashinfer
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_NARROW=1 tests softmax_narrow 150 tests/ops/test_sampling.py -k "matches_reference or many_rows or resident"
bench softmax_mid 150 softmax --backends ember,torch_compile --shapes 512x32000,256x49152
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_NARROW=1 bench softmax_narrow 60 softmax --backends ember --shapes 512x32000,256x49152
M=gpu__time_duration.sum,launch__grid_size,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_BULK=1 timeout 90 ncu --clock-control none --kernel-name regex:softmax --launch-skip 2 --launch-count 1 --metrics $M python3 -c "
import torch, ember
x = 4 * torch.randn(128, 128256, device='cuda')
for _ in range(4): ember.softmax(x, 0.7)
torch.cuda.synchronize()" > $OUT/ncu_bulk.txt 2>&1; echo "== ncu softmax bulk rc $?"; grep -E "softmax|gpu__|grid|dram|warps|issue|stalled" $OUT/ncu_bulk.txt | head -14
