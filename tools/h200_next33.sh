#!/usr/bin/env bash
# Session 15's second H200 call (device tool, `.whl` carried with cupti-python 13.0.x and
# pyelftools): softmax_grid_kernel's exchange (EMBER_SOFTMAX_GRID_EXCHANGE; softmax.cuh).
# Predicted at 128 x 128 256 fp32 (session 14: 40.70 us under CUPTI, of which ncu timed the
# kernel alone at 37.2): 0 (cudaMemsetAsync) ~39.5; 1 (self-zeroed counts) ~38;
# 2 (flagged pairs, the default) ~35.5-37.
#   1. the softmax GPU tests, default build (2), then the grid-touching ones under 1 and 0
#   2. the A/B: 2, 1, 0 at 128/96/64 rows, fp32 and bf16, interleaved twice
#   3. the peers at 128 and 64 rows (the 2x target is against the best of them in this run)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next33.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
S=128x128256,96x128256,64x128256
tests softmax 150 tests/ops/test_sampling.py
K="grid or graph or streams or many_rows or off_the"
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_GRID_EXCHANGE=1 tests ex1 60 tests/ops/test_sampling.py -k "$K"
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_GRID_EXCHANGE=0 tests ex0 60 tests/ops/test_sampling.py -k "$K"
for r in 1 2; do
  step 40 ab$r && bench ex2_$r 40 softmax --backends ember --shapes $S --dtypes fp32,bf16
  step 40 ab$r && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_GRID_EXCHANGE=1 bench ex1_$r 40 softmax --backends ember --shapes $S --dtypes fp32,bf16
  step 40 ab$r && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_GRID_EXCHANGE=0 bench ex0_$r 40 softmax --backends ember --shapes $S --dtypes fp32,bf16
done
step 150 peers && bench peers 150 softmax --backends torch_compile,flashinfer --shapes 128x128256,64x128256 --dtypes fp32,bf16
step 60 ncu && timeout 60 ncu --clock-control none --launch-skip 5 --launch-count 1 --section SpeedOfLight --section WarpStateStats --kernel-name regex:softmax_grid python3 -m ember.bench softmax --backends ember --shapes 128x128256 --dtypes fp32 --timing cuda_event -q > $OUT/ncu_softmax.txt 2>&1
grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued" $OUT/ncu_softmax.txt | head
echo "== done at ${SECONDS}s"
