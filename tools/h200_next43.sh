#!/usr/bin/env bash
# Session 16, last call (device tool, `.whl` carried; output under $OUT; timeout_s 150).
# EMBER_DECODE_QK_SPLIT=1: two accumulator chains an n-tile for S = Q K^T (4 independent MMA
# chains a warp instead of 2). h200_next42 (STALLS=1) at 256 x 1024 64/8: of ember's 4.61 cycles
# an issued instruction, 1.58 are fixed-latency waits and 0.63 no-instruction (FlashInfer: 0.88
# and 0.04 of 8.65, long-scoreboard 4.34). Predicted: u256 277 -> 268-274 us if the QK chain is
# on the critical path; no change if not. Probe: graph replay, fp64 check first.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next43.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
timeout 140 python3 tools/decode_probe.py --variants base,qks --cases u256,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
echo "== done at ${SECONDS}s"
