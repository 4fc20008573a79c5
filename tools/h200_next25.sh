#!/usr/bin/env bash
# Session 13's fourth H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# softmax_pair_kernel with its float4 stores written as one st.global.v4 each (ncu, call 3: nvcc
# had split them into 32-bit stores; bf16 64 rows 78.3 us, L2 70 % busy, DRAM 41 %)
#   1. the softmax GPU tests, default and the pair tests with -DEMBER_SOFTMAX_PAIR_EXP=0
#   2. softmax at 128 / 96 / 64 / 256 x 128 256, fp32 and bf16, with torch.compile and FlashInfer,
#      and -DEMBER_SOFTMAX_PAIR=0 (8-CTA clusters) in the same run
#      (predicted: fp32 128 rows 55.5 -> 37-40 us; bf16 135 -> 35-40 us)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next25.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests softmax 120 tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR_EXP=0 tests softmax_e0 80 tests/ops/test_sampling.py -k "pair or many_more"
S=128x128256,96x128256,64x128256,256x128256
bench softmax 240 softmax --backends ember,torch_compile,flashinfer --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR=0 bench softmax_p0 80 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR_EXP=0 bench softmax_e0 40 softmax --backends ember --shapes 128x128256 --dtypes fp32
