#!/usr/bin/env bash
# Session 19 (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next55.sh
# EMBER_SOFTMAX_REG=1 (softmax_reg_kernel: the current row in registers, the next one landing in
# shared memory by cp.async, one ex2 a value) and =2 (its CTA reduction as pairs in one pass):
# their softmax GPU tests, then the A/B against the default interleaved twice (CUPTI), the peers. On an H200 only, h200_next54.sh's KV2 decode
# rows (session 18 measured them on an H100, where both kernels sit at the copy limit).
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
passed() { grep -q " passed" $OUT/tests_$1.txt && ! grep -qE "[0-9]+ (failed|error)" $OUT/tests_$1.txt; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupti; print('cupti ok')" 2>&1 | tail -1
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
R1=-DEMBER_SOFTMAX_REG=1 R2=-DEMBER_SOFTMAX_REG=2
EMBER_EXTRA_CUDA_FLAGS=$R1 tests reg1 150 tests/ops/test_sampling.py -x -k "softmax or large"
step 100 reg2tests && EMBER_EXTRA_CUDA_FLAGS=$R2 tests reg2 100 tests/ops/test_sampling.py -x -k "softmax or large"
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
S2="softmax --backends ember --shapes 128x128256 --dtypes fp32,bf16"
step 45 base1 && bench base1 45 $S
passed reg1 && step 45 reg1 && EMBER_EXTRA_CUDA_FLAGS=$R1 bench reg1_1 45 $S
passed reg2 && step 45 reg2 && EMBER_EXTRA_CUDA_FLAGS=$R2 bench reg2_1 45 $S
step 35 base2 && bench base2 35 $S2
passed reg1 && step 35 reg1b && EMBER_EXTRA_CUDA_FLAGS=$R1 bench reg1_2 35 $S2
passed reg2 && step 35 reg2b && EMBER_EXTRA_CUDA_FLAGS=$R2 bench reg2_2 35 $S2
step 100 peers && bench peers 100 softmax --backends torch_compile,flashinfer --shapes 128x128256 --dtypes fp32,bf16
if [[ "$GPU" == *H200* ]]; then
  D="decode --backends ember --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti"
  step 60 kvb && bench kvbase 60 $D
  step 60 kv2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 bench kv2 60 $D
  step 90 fi && bench fi 90 decode --backends flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti
fi
echo "== done at ${SECONDS}s"
