#!/usr/bin/env bash
# Session 11's third H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# the streaming sampler after its first measurement (59.65 us at 128 x 128 256 top-p, 512
# threads, instruction-bound at 1.4 IPC): the bad-value test folded into a min and the fp64
# sum, predicated appends; =1 is 512 threads x 8 packs, =2 1024 threads x 4 packs (64 registers).
#   1. the filter GPU tests under both values
#   2. top-p from probs at 1 / 16 / 32 / 64 / 128 rows: default build, =1, =2, FlashInfer
#      (predicted =2 at 128 rows: 35-45 us); top-k, top-k + top-p from probs under =2
#   3. ncu of the =2 stream kernel
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next16.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=1 tests stream1 150 tests/ops/test_sampling_filters.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=2 tests stream2 150 tests/ops/test_sampling_filters.py
S=128x128256,64x128256,32x128256,16x128256,1x128256
bench top_p 150 top_p_sampling_from_probs --backends ember,flashinfer --shapes $S
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=1 bench top_p_s1 60 top_p_sampling_from_probs --backends ember --shapes $S
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=2 bench top_p_s2 60 top_p_sampling_from_probs --backends ember --shapes $S
for op in top_k_sampling_from_probs top_k_top_p_sampling_from_probs; do
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=2 bench ${op}_s2 40 $op --backends ember --shapes 128x128256
done
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=2 timeout 90 ncu --clock-control none --kernel-name regex:filter_stream --launch-skip 2 --launch-count 1 --metrics gpu__time_duration.sum,launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active python3 -c "
import torch, ember
p = torch.softmax(4 * torch.randn(128, 128256, device='cuda'), -1)
for _ in range(4): ember.top_p_sampling_from_probs(p, 0.9, seed=1)
torch.cuda.synchronize()" > $OUT/ncu_stream2.txt 2>&1; echo "== ncu rc $?"; grep -E "gpu__|regis|dram|warps|inst" $OUT/ncu_stream2.txt | head -8
