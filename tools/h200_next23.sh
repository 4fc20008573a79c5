#!/usr/bin/env bash
# Session 13's second H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# softmax_pair_kernel after call 1 (fp32 54.5, bf16 89.5 us at 128 x 128 256 against 43.7 / 38.6
# for the 8-CTA clusters): bf16 packs now one 16-byte shared load (were 8 16-bit loads), the
# statistics one rescale a pack, and fp32 keeps its exponentials in place (EMBER_SOFTMAX_PAIR_EXP)
#   1. softmax GPU tests, default and with -DEMBER_SOFTMAX_PAIR_EXP=0
#   2. softmax at 128 / 64 / 256 x 128 256, fp32 and bf16: default with torch.compile and
#      FlashInfer; -DEMBER_SOFTMAX_PAIR_EXP=0; -DEMBER_SOFTMAX_PAIR=0 (8-CTA clusters)
#      (predicted: 128 rows fp32 36-40 us, bf16 33-37)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next23.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests softmax 150 tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR_EXP=0 tests softmax_e0 100 tests/ops/test_sampling.py -k "pair or many_more or matches"
S=128x128256,64x128256,256x128256
bench softmax 200 softmax --backends ember,torch_compile,flashinfer --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR_EXP=0 bench softmax_e0 60 softmax --backends ember --shapes $S --dtypes fp32
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR=0 bench softmax_p0 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
