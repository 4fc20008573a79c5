#!/usr/bin/env bash
# Session 16, fourth call (device tool, `.whl` carried; output under $OUT; timeout_s 600).
# The decode tile loads' address arithmetic (h200_next38's ncu: at 256 x 1024 64/8 bf16 this
# kernel issues ~2x FlashInfer's instructions a token, SM 40 % against 21 %, 2 warps a
# scheduler at 4.6 cycles an instruction, DRAM 78.6 % against 83.4 %). Static loop, bf16 d128
# g8, without the division paths: 1 021 instructions a warp a tile -> 847 (EMBER_DECODE_CPT=2)
# -> 831 (+ EMBER_DECODE_ADDR32=1); registers 213 -> 196; the fp8 kernel's 8-byte stack gone.
# Predicted: 256 x 1024 278 -> 266-272 us; 128 x 2048 -1-2 %; 64 x 4096 and fp8 within 1 %.
#   1. decode GPU tests under both switches
#   2. decode_probe.py: base, cpt2, cpt2a32 on every case (graph replay, fp64 check first)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next39.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_CPT=2 -DEMBER_DECODE_ADDR32=1" tests cpt2a32 200 tests/ops/test_decode.py -x
step 300 probe && timeout 300 python3 tools/decode_probe.py --variants base,cpt2,cpt2a32 --cases u256,u128,u64,small,page1,skew,fp8 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
echo "== done at ${SECONDS}s"
