#!/usr/bin/env bash
# Session 14's second H200 call (device tool, `.whl` carried with cupti-python 13.0.1 and
# pyelftools this time: h200_next29.sh ran without them and timed by CUDA events, std up to
# 11 us): the softmax A/B again, timed by CUPTI, and the GRID build's tests (next29's -k matched
# the module name and selected nothing).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next30.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -c "import cupti; print('cupti', cupti.__file__)" 2>&1 | tail -1
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
S=128x128256,96x128256,64x128256,256x128256
G=-DEMBER_SOFTMAX_GRID=1
bench softmax 100 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=$G bench softmax_grid 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_VEC_STORE=1 bench softmax_vs 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=$G tests softmax_grid 130 tests/ops/test_sampling.py -x
step 150 peers && bench peers 150 softmax --backends torch_compile,flashinfer --shapes 128x128256,64x128256 --dtypes fp32,bf16
step 60 softmax_again && bench softmax2 60 softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16
step 60 grid_again && EMBER_EXTRA_CUDA_FLAGS=$G bench softmax_grid2 60 softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16
echo "== done at ${SECONDS}s"
