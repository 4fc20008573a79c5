#!/usr/bin/env bash
# Session 19 (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next55.sh
# EMBER_SOFTMAX_REG=1 (softmax_reg_kernel: the current row in registers, the next one landing in
# shared memory by cp.async, one ex2 a value): its softmax GPU tests, then the A/B against the
# default interleaved twice (CUPTI), then the peers. On an H200 only, h200_next54.sh's KV2 decode
# rows (session 18 measured them on an H100, where both kernels sit at the copy limit).
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
passed() { grep -q " passed" $OUT/tests_$1.txt && ! grep -qE "[0-9]+ (failed|error)" $OUT/tests_$1.txt; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupti; print('cupti ok')" 2>&1 | tail -1
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
R=-DEMBER_SOFTMAX_REG=1
EMBER_EXTRA_CUDA_FLAGS=$R tests reg 200 tests/ops/test_sampling.py -x -k "softmax or large"
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
if passed reg; then
  for r in 1 2; do
    step 45 base$r && bench base$r 45 $S
    step 45 reg$r && EMBER_EXTRA_CUDA_FLAGS=$R bench reg$r 45 $S
  done
fi
step 120 peers && bench peers 120 softmax --backends torch_compile,flashinfer --shapes 128x128256 --dtypes fp32,bf16
if [[ "$GPU" == *H200* ]]; then
  D="decode --backends ember --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti"
  step 60 kvb && bench kvbase 60 $D
  step 60 kv2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 bench kv2 60 $D
  step 90 fi && bench fi 90 decode --backends flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti
fi
echo "== done at ${SECONDS}s"
