#!/usr/bin/env bash
# For session 14 (device tool, `.whl` carried; output under $OUT; timeout_s 600): the fp8 decode
# A/B written in session 13, unmeasured: EMBER_DECODE_FP8_CVT=1 (fp8 -> fp16 by cvt, the loop's
# SASS 1 359 -> 1 152) and EMBER_DECODE_LAZY=2 (no O rescale on most tiles), against the default
# and FlashInfer's fp8 paths; their decode tests; ncu's issue rate of the default and cvt builds
# (the hypothesis: the fp8 loop is issue-bound, notes/decode.md).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next28.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_FP8_CVT=1 -DEMBER_DECODE_LAZY=2" tests decode_cvt_lazy 120 tests/ops/test_decode.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_LAZY=1 tests decode_lazy1 120 tests/ops/test_decode.py
timeout 100 python3 tools/decode_probe.py --variants base,fp8cvt,lazy2,cvtlazy --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe_fp8.txt
bench fp8 60 decode --backends ember,flashinfer --shapes 64x4096x32x8x128x16 --kv-dtype e4m3
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_FP8_CVT=1 -DEMBER_DECODE_LAZY=2" bench fp8_cvt_lazy 60 decode --backends ember --shapes 64x4096x32x8x128x16 --kv-dtype e4m3
for v in "" "-DEMBER_DECODE_FP8_CVT=1"; do
  EMBER_EXTRA_CUDA_FLAGS="$v" timeout 120 ncu --clock-control none --kernel-name regex:decode_tc --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats python3 -m ember.bench decode --backends ember --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cuda_event -q > $OUT/ncu_fp8_${v:+cvt}.txt 2>&1
  echo "== ncu fp8 {$v} rc $?"; grep -E "Duration|Issue Slots Busy|Issued Ipc|DRAM Throughput|Warp Cycles Per Issued|Stall (Long|Wait|Math|Short|Barrier|Not Sel)" $OUT/ncu_fp8_${v:+cvt}.txt | head -12
done
