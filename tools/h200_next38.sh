#!/usr/bin/env bash
# Session 16, third call (device tool, `.whl` carried; output under $OUT; timeout_s 600).
#   1. softmax 128 x 128 256 fp32 (the issue-5 row), interleaved A/B of three off-by-default
#      switches against the default (40.9 us, CUPTI): EMBER_SOFTMAX_EPOCH=1 (no memset of the
#      counts: predicted -0.9 us, the memset's share in tools/softmax_breakdown.py);
#      EMBER_SOFTMAX_LDHINT=1/2 and EMBER_SOFTMAX_STHINT=1 (evict-first loads and stores, or
#      256-byte L2 fetches: predicted 0 to -1 us, as the norm's hints were 0.2-0.6 %).
#   2. ncu on the decode case furthest from FlashInfer (256 x 1024 64/8 bf16, 0.94x): ember's
#      kernel and FlashInfer's tensor-core kernel, side by side (DRAM, issue, occupancy).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next38.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
A="softmax --backends ember --shapes 128x128256 --dtypes fp32"
bench base 45 $A
step 45 epoch && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_EPOCH=1 bench epoch 45 $A
step 45 ldst1 && EMBER_EXTRA_CUDA_FLAGS="-DEMBER_SOFTMAX_LDHINT=1 -DEMBER_SOFTMAX_STHINT=1" bench ldst1 45 $A
step 45 ld2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_LDHINT=2 bench ld2 45 $A
step 45 st1 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_STHINT=1 bench st1 45 $A
step 20 base2 && bench base2 20 $A
step 20 epoch2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_EPOCH=1 bench epoch2 20 $A
NCU="ncu --clock-control none --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
D="decode --shapes 256x1024x64x8x128x16 --timing cuda_event -q"
step 90 ncu_ember && timeout 90 $NCU --kernel-name regex:decode_tc python3 -m ember.bench $D --backends ember > $OUT/ncu_dec_ember.txt 2>&1
step 150 ncu_fi && timeout 150 $NCU --kernel-name regex:Prefill python3 -m ember.bench $D --backends flashinfer > $OUT/ncu_dec_fi.txt 2>&1
for f in $OUT/ncu_dec_ember.txt $OUT/ncu_dec_fi.txt; do echo "== $f"; grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Compute \(SM\)|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy|Registers Per|Shared Memory Config|Dynamic Shared|Grid Size|Block Size|Waves Per SM|L2 Hit" $f | head -24; done
echo "== done at ${SECONDS}s"
