#!/usr/bin/env bash
# Session 18 (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next53.sh
# Two first runs, each correctness before time: EMBER_DECODE_KV2=1 (FlashInfer's decode pipeline
# shape; session 17) and EMBER_SOFTMAX_LAG=1 (softmax_lag_kernel, session 18: jobs of 4 096
# elements, stats and store phases a round apart, the second read from L2). Then their A/Bs:
# the softmax harness rows (CUPTI) against the default in the same call, the decode probe
# (graph replay) and the harness at 256 x 1024 beside FlashInfer's tensor-core path.
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
passed() { grep -q " passed" $OUT/tests_$1.txt && ! grep -qE "[0-9]+ (failed|error)" $OUT/tests_$1.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 tests kv2 200 tests/ops/test_decode.py -x
L=-DEMBER_SOFTMAX_LAG=1
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
step 90 lagtests && EMBER_EXTRA_CUDA_FLAGS=$L tests lag1 90 tests/ops/test_sampling.py -x -k softmax
if passed lag1; then
  step 50 lagab && EMBER_EXTRA_CUDA_FLAGS=$L bench lag1 50 $S
  step 40 lagab && bench base 40 $S
fi
passed kv2 && step 130 probe && timeout 130 python3 tools/decode_probe.py --variants base,kv2 --cases u256,u64,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe1.txt
passed lag1 && step 40 lag2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_LAG=2 bench lag2 40 softmax --backends ember --shapes 128x128256 --dtypes fp32,bf16
passed kv2 && step 110 harness && { EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 bench kv2 45 decode --backends ember --shapes 256x1024x64x8x128x16 --dtypes bf16 --timing cupti
  bench fi 65 decode --backends ember,flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16 --dtypes bf16 --timing cupti; }
echo "== done at ${SECONDS}s"
