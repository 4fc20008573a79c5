#!/usr/bin/env bash
# Session 19, second call (device tool, `.whl` carried; output under $OUT; timeout_s 420):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next56.sh
# h200_next55.sh (an H100) had REG=2 win bf16 (38.9 against 41.4 µs) and lose fp32 (53.5 against
# 49.8), its pair reduction worth 4.5 µs over REG=1's five barriers. EMBER_SOFTMAX_PAIRS=1 puts
# that reduction in the default grid kernel: its softmax GPU tests, then the A/B, interleaved.
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 400 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
passed() { grep -q " passed" $OUT/tests_$1.txt && ! grep -qE "[0-9]+ (failed|error)" $OUT/tests_$1.txt; }
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
P=-DEMBER_SOFTMAX_PAIRS=1 R2=-DEMBER_SOFTMAX_REG=2
EMBER_EXTRA_CUDA_FLAGS=$P tests pairs 100 tests/ops/test_sampling.py -x -k "softmax or large"
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
for r in 1 2; do
  step 40 base$r && bench base$r 40 $S
  passed pairs && step 40 pairs$r && EMBER_EXTRA_CUDA_FLAGS=$P bench pairs$r 40 $S
  step 40 reg2_$r && EMBER_EXTRA_CUDA_FLAGS=$R2 bench reg2_$r 40 $S
done
echo "== done at ${SECONDS}s"
