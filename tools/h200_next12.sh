#!/usr/bin/env bash
# (Ran in session 10 at cf6ed91; EMBER_MERGE_BATCH and EMBER_MERGE_PAIRS, which it A/Bs, were
# removed in 195bf10 — check out cf6ed91 to rerun it.)
# Session 10's second H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   - the switch flags now reach pytest (tests/conftest.py kept them out until session 10, so a
#     GPU run "under a switch" tested the default kernels): test_switch_env.py under a flag;
#   - the new defaults' GPU tests: merge_states_vec_kernel (EMBER_MERGE_VEC=1) and clusters of
#     2 or 4 for mid-size vocabularies (EMBER_SOFTMAX_NARROW=1), then the merge variants'
#     tests under their flags;
#   - merge_states A/B: the default (4 states' loads a thread, one pair) against 2 states
#     (EMBER_MERGE_BATCH=2: 39 registers, 6 CTAs an SM), two pairs a thread (EMBER_MERGE_PAIRS=2)
#     and both, with FlashInfer in the same run;
#   - softmax at 512 x 32 000, 256 x 49 152 and 128 x 128 256 against torch.compile;
#   - silu_and_mul at 8192 x 2*14336 against torch.compile (0.995x in session 7, not rerun);
#   - Nsight Compute: the persistent softmax's grid at 128 x 128 256 (how many 8-CTA clusters
#     fit: 33 would be 2 CTAs on every SM) and merge_states_vec_kernel's occupancy and DRAM.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next12.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_BATCH=2 tests switch_env 30 tests/ops/test_switch_env.py tests/unit/test_config.py -k "switch_flags or scrub"
tests merge 60 tests/ops/test_decode.py -k merge
tests sampling 150 tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_MERGE_BATCH=2 -DEMBER_MERGE_PAIRS=2" tests merge_b2p2 60 tests/ops/test_decode.py -k merge
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_MERGE_PAIRS=2" tests merge_p2 60 tests/ops/test_decode.py -k merge
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_NARROW=0 tests softmax_n0 90 tests/ops/test_sampling.py -k many_rows
bench merge 120 merge_states --backends ember,flashinfer
for f in "-DEMBER_MERGE_BATCH=2" "-DEMBER_MERGE_PAIRS=2" "-DEMBER_MERGE_BATCH=2 -DEMBER_MERGE_PAIRS=2"; do
  EMBER_EXTRA_CUDA_FLAGS="$f" bench "merge${f// /}" 40 merge_states --backends ember
done
bench softmax 150 softmax --backends ember,torch_compile --shapes 512x32000,256x49152,128x128256
bench silu 150 silu_and_mul --backends ember,torch_compile --shapes 8192x28672
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct
timeout 90 ncu --clock-control none --kernel-name regex:"softmax|merge" --launch-skip 2 --launch-count 2 --metrics $M python3 -c "
import torch, ember
x = 4 * torch.randn(128, 128256, device='cuda')
v = torch.randn(4096, 2, 32, 128, device='cuda', dtype=torch.bfloat16)
s = torch.randn(4096, 2, 32, device='cuda')
for _ in range(3): ember.softmax(x, 0.7)
for _ in range(3): ember.merge_states(v, s)
torch.cuda.synchronize()" > $OUT/ncu.txt 2>&1; echo "== ncu rc $?"; grep -E "softmax|merge|gpu__|grid|regis|dram|warps|issue|stalled" $OUT/ncu.txt | head -24
