#!/usr/bin/env bash
# For session 14 (device tool, `.whl` carried; output under $OUT; timeout_s 600): issue 4's decode
# table again (last run in full at ec96584; fp8 and plan at b2a2be8), against both FlashInfer
# 0.5.3 paths in the same run, and the 2-stage / 3-CTAs-an-SM variant on the uniform shapes
# (short units, 16 tiles at 256 x 1024, pay a pipeline fill and a combine each: more CTAs an SM
# overlap them; at 64 x 4096 it lost 8 % in session 6); then fp8 by cvt (the end of this file).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next27.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests decode 120 tests/ops/test_decode.py
B="decode --backends ember,flashinfer"
bench uniform 200 $B --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16
bench skewed 60 $B --shapes 64x4096x32x8x128x16 --lengths pareto
bench small_page1 90 $B --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1
bench fp8 60 $B --shapes 64x4096x32x8x128x16 --kv-dtype e4m3
timeout 90 python3 tools/decode_probe.py --variants base,s2 --cases u64,u256,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
# fp8: the cvt conversion (EMBER_DECODE_FP8_CVT=1, session 13: 1 359 -> 1 152 SASS instructions in
# the loop); its fp8 tests, the probe against the default, and ncu's issue rate of both builds
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_FP8_CVT=1 tests decode_cvt 90 tests/ops/test_decode.py -k "fp8 or e4m3"
timeout 90 python3 tools/decode_probe.py --variants base,fp8cvt --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe_fp8.txt
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_FP8_CVT=1 bench fp8_cvt 60 decode --backends ember --shapes 64x4096x32x8x128x16 --kv-dtype e4m3
for v in "" "-DEMBER_DECODE_FP8_CVT=1"; do
  EMBER_EXTRA_CUDA_FLAGS="$v" timeout 120 ncu --clock-control none --kernel-name regex:decode_tc --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats python3 -m ember.bench decode --backends ember --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cuda_event -q > $OUT/ncu_fp8_${v:+cvt}.txt 2>&1
  echo "== ncu fp8 {$v} rc $?"; grep -E "Duration|Issue Slots Busy|Issued Ipc|DRAM Throughput|Warp Cycles Per Issued|Stall (Long|Wait|Math|Short|Barrier|Not Sel)" $OUT/ncu_fp8_${v:+cvt}.txt | head -12
done
