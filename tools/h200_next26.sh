#!/usr/bin/env bash
# For session 14's first H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# softmax_grid_kernel (EMBER_SOFTMAX_GRID=1, written in session 13, never run on a GPU): the
# 8-CTA persistent softmax without clusters, a cooperative grid of 264 CTAs exchanging (max, sum)
# through global memory: 33 rows a round instead of 30 (GPC quantisation).
#   1. the softmax GPU tests under -DEMBER_SOFTMAX_GRID=1 (graph replay, two streams, limits),
#      with a timeout: a wait that never ends shows as rc 124
#   2. softmax at 128 / 96 / 64 / 256 x 128 256, fp32 and bf16: default with torch.compile and
#      FlashInfer; -DEMBER_SOFTMAX_GRID=1 (predicted fp32 128 rows 42.2 -> 34-36 us),
#      -DEMBER_SOFTMAX_VEC_STORE=1 (16-byte stores in the store pass; predicted 0-2 us) and both
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next26.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_GRID=1 tests softmax_grid 150 tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_VEC_STORE=1 tests softmax_vs 150 tests/ops/test_sampling.py
tests softmax 100 tests/ops/test_sampling.py -k "graph or streams or large or 16_byte"
S=128x128256,96x128256,64x128256,256x128256
bench softmax 300 softmax --backends ember,torch_compile,flashinfer --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_GRID=1 bench softmax_grid 90 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_VEC_STORE=1 bench softmax_vs 90 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_SOFTMAX_GRID=1 -DEMBER_SOFTMAX_VEC_STORE=1" bench softmax_both 90 softmax --backends ember --shapes $S --dtypes fp32,bf16
