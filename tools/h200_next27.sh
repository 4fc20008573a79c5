#!/usr/bin/env bash
# For session 14 (device tool, `.whl` carried; output under $OUT; timeout_s 600): issue 4's decode
# table again (last run in full at ec96584; fp8 and plan at b2a2be8), against both FlashInfer
# 0.5.3 paths in the same run, and the 2-stage / 3-CTAs-an-SM variant on the uniform shapes
# (short units, 16 tiles at 256 x 1024, pay a pipeline fill and a combine each: more CTAs an SM
# overlap them; at 64 x 4096 it lost 8 % in session 6), and EMBER_DECODE_LAZY 1 / 2 (no O rescale
# on tiles without a new maximum). fp8 by cvt: tools/h200_next28.sh.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next27.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests decode 120 tests/ops/test_decode.py
B="decode --backends ember,flashinfer"
bench uniform 200 $B --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16
bench skewed 60 $B --shapes 64x4096x32x8x128x16 --lengths pareto
bench small_page1 90 $B --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1
bench fp8 60 $B --shapes 64x4096x32x8x128x16 --kv-dtype e4m3
timeout 90 python3 tools/decode_probe.py --variants base,s2,lazy1,lazy2 --cases u64,u256,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
