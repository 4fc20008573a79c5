#!/usr/bin/env bash
# Session 19, third call (device tool, `.whl` carried; output under $OUT; timeout_s 420):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next57.sh
# softmax_reg_kernel the default for 16-bit logits (EMBER_SOFTMAX_REG=2): the sampling GPU tests
# at the new default, its rows against EMBER_SOFTMAX_REG=0 (the grid kernel everywhere), then
# the rest of tests/ops while time lasts.
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 390 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
tests sampling 150 tests/ops/test_sampling.py
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes bf16,fp32"
step 40 def && bench default 40 $S
step 40 reg0 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_REG=0 bench reg0 40 $S
step 60 rest && tests rest $((390 - SECONDS)) tests/ops --deselect tests/ops/test_sampling.py -p no:randomly --ignore=tests/ops/test_sampling.py
echo "== done at ${SECONDS}s"
