#!/usr/bin/env bash
# Session 18 (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next52.sh
# EMBER_DECODE_KV2=1 (FlashInfer's pipeline shape, written in session 17, never run): its decode
# GPU tests, then the probe against the default and s2b (2 stages at 2 CTAs an SM) on the
# uniform shapes, then against the default on the small-batch, page-1 and Pareto cases.
# (h200_next51.sh's COMBINE2-at-both-G check is dropped: FlashInfer pays G = 8 about as much
# as ember, 259.1 -> 266.8 us against 268.6 -> 281.3, so the gap to close is the G = 4 one.)
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 tests kv2 220 tests/ops/test_decode.py -x
step 170 probe1 && timeout 170 python3 tools/decode_probe.py --variants base,kv2,s2b --cases u256,u64,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe1.txt
# The harness, side by side with FlashInfer's tensor-core path (CUPTI, rows in $OUT/bench.jsonl).
step 130 harness && { EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 bench kv2 60 decode --backends ember --shapes 256x1024x64x8x128x16 --dtypes bf16 --timing cupti
  bench fi 70 decode --backends ember,flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16 --dtypes bf16 --timing cupti; }
step 120 probe2 && timeout 120 python3 tools/decode_probe.py --variants base,kv2 --cases small,page1,skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"
