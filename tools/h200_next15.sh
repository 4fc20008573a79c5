#!/usr/bin/env bash
# Session 11's second H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# the streaming top-p sampler (filter_stream_kernel, -DEMBER_FILTER_STREAM=1, written this
# session, unmeasured) and the filters' new top-p total (the row's fp64 sum; default build):
#   1. the filter and sampling GPU tests, default build, then the filter tests under the switch
#   2. A/B at 128 x 128 256 (and 1 and 16 rows): top-p, top-k, min-p, top-k + top-p from probs,
#      the default build against the switch and FlashInfer (predicted top-p 110.9 -> 30-45 us)
#   3. ncu on the stream kernel (grid, registers, DRAM throughput)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next15.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests default 200 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=1 tests stream 150 tests/ops/test_sampling_filters.py
bench top_p 150 top_p_sampling_from_probs --backends ember,flashinfer --shapes 128x128256,16x128256,1x128256
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=1 bench top_p_stream 60 top_p_sampling_from_probs --backends ember --shapes 128x128256,16x128256,1x128256
for op in top_k_sampling_from_probs min_p_sampling_from_probs top_k_top_p_sampling_from_probs; do
  bench $op 40 $op --backends ember --shapes 128x128256
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=1 bench ${op}_stream 40 $op --backends ember --shapes 128x128256
done
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=1 timeout 90 ncu --clock-control none --kernel-name regex:filter --launch-skip 4 --launch-count 2 --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum python3 -c "
import torch, ember
p = torch.softmax(4 * torch.randn(128, 128256, device='cuda'), -1)
for _ in range(4): ember.top_p_sampling_from_probs(p, 0.9, seed=1)
torch.cuda.synchronize()" > $OUT/ncu_stream.txt 2>&1; echo "== ncu rc $?"; grep -E "filter|gpu__|grid|regis|dram|warps|inst" $OUT/ncu_stream.txt | head -16
