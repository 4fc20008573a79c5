#!/usr/bin/env bash
# Session 11's first H200 call (ran at 597adc2; EMBER_SOFTMAX_THIRD was removed after it lost,
# so rerun it at that commit only). The calls (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   (default)  the softmax persistent kernel at 3 CTAs an SM (-DEMBER_SOFTMAX_THIRD=1, written in
#              session 10, unmeasured): its tests, then A/B against the default and torch.compile
#              at 128 x 128 256 fp32 and bf16 (42.78 / 38.24 us now; predicted 38-40 / 34-36),
#              with ncu's grid size (45 clusters of 8 expected, 30 now)
#   SUITE=1    the whole GPU suite at HEAD (last: 58c8e6e's defaults, session 10)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next14.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_THIRD=1 tests third 150 tests/ops/test_sampling.py -k "softmax or matches_reference or many_rows or resident"
bench softmax 150 softmax --backends ember,torch_compile --shapes 128x128256 --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_THIRD=1 bench third 60 softmax --backends ember --shapes 128x128256 --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_THIRD=1 timeout 90 ncu --clock-control none --kernel-name regex:softmax --launch-skip 2 --launch-count 1 --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active python3 -c "
import torch, ember
x = 4 * torch.randn(128, 128256, device='cuda')
for _ in range(4): ember.softmax(x, 0.7)
torch.cuda.synchronize()" > $OUT/ncu_third.txt 2>&1; echo "== ncu rc $?"; grep -E "softmax|gpu__|grid|regis|dram|warps" $OUT/ncu_third.txt | head -8
