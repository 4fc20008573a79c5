#!/usr/bin/env bash
# Session 16, second call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# EMBER_SOFTMAX_BULK=1 after its store pass was made coalesced (first run, h200_next36.sh:
# 105.8 fp32 / 171.6 bf16 us, ncu: LG-throttled, DRAM 21 %, L2 73 % — each thread wrote its
# pack's 4 / 8 floats as scattered 4-byte stores). Predicted now: 36-40 fp32, 32-36 bf16.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next37.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
B=-DEMBER_SOFTMAX_BULK=1
S=128x128256,64x128256
EMBER_EXTRA_CUDA_FLAGS=$B tests bulk 120 tests/ops/test_sampling.py -x -k softmax
step 60 ab && EMBER_EXTRA_CUDA_FLAGS=$B bench bulk 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
step 60 ab && bench base 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
step 45 bulk128 && EMBER_EXTRA_CUDA_FLAGS="$B -DEMBER_SOFTMAX_BULK_KB=128" bench bulk128 45 softmax --backends ember --shapes 128x128256 --dtypes fp32,bf16
step 60 ncu && EMBER_EXTRA_CUDA_FLAGS=$B timeout 60 ncu --clock-control none --launch-skip 5 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --kernel-name regex:softmax_bulk python3 -m ember.bench softmax --backends ember --shapes 128x128256 --dtypes bf16 --timing cuda_event -q > $OUT/ncu_bulk.txt 2>&1
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Warp Cycles Per Issued|stalled" $OUT/ncu_bulk.txt | head -20
echo "== done at ${SECONDS}s"
