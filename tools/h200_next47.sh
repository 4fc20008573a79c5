#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 600).
# Two fixes from ncu's per-instruction samples (h200_next46.sh) of the decode kernel:
#   EMBER_DECODE_PG_LEAD=2/3: page numbers read 2 or 3 tiles ahead (6 % of all warp samples wait
#     on the page-table read issued one tile earlier; the prologue's reads all at once);
#   EMBER_DECODE_COMBINE2=1: the warps' combine a thread per 8 elements (8.3 % of the samples at
#     256 x 1024, 4.7 % at 128 x 2048, in 8 rounds of a ~150-cycle chain a CTA).
# Their decode GPU tests (both on), then the probe. Predicted: 256 x 1024 64/8 277 -> 262-270
# us with both, 128 x 2048 133 -> 129-131, 64 x 4096 246.7 -> 244-246.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next47.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_PG_LEAD=3 -DEMBER_DECODE_COMBINE2=1" tests l3c 200 tests/ops/test_decode.py -x
step 170 probe && timeout 170 python3 tools/decode_probe.py --variants base,lead2,lead3,comb,l2c,l3c --cases u256,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
step 150 probe2 && timeout 150 python3 tools/decode_probe.py --variants base,lead3,l2c,l3c --cases u64,fp8,skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"
