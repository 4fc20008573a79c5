#!/usr/bin/env bash
# Session 16, fifth call (device tool, `.whl` carried; output under $OUT; timeout_s 300).
# EMBER_DECODE_CPT/ADDR32 (h200_next39): 17 % fewer instructions, no change anywhere (u256
# 277.3 -> 277.5 us), so the 256 x 1024 gap is not issue. Next difference from FlashInfer's
# kernel at the same grid, occupancy and bytes: the grid's order. EMBER_DECODE_UNIT_FAST=1
# puts units fastest (FlashInfer's order). Predicted: if DRAM locality across a unit's heads
# is what costs, u256 moves toward FlashInfer's 261; else within 0.5 %.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next40.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
timeout 240 python3 tools/decode_probe.py --variants base,ufast --cases u256,u128,u64,skew,small,fp8 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
echo "== done at ${SECONDS}s"
