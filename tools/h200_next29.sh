#!/usr/bin/env bash
# Session 14's first H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# the A/Bs written in session 13 and never run, most valuable first, each step skipped when the
# call's 600 s would not hold it (`step LIMIT` below):
#   1. softmax: EMBER_SOFTMAX_GRID=1 (clusterless cooperative grid, 264 CTAs; predicted fp32
#      128 x 128 256: 42.2 -> 34-36 us) and EMBER_SOFTMAX_VEC_STORE=1 (16-byte stores; 0-2 us),
#      their softmax tests, then the default against torch.compile and FlashInfer
#   2. fp8 decode: EMBER_DECODE_FP8_CVT=1 with EMBER_DECODE_LAZY=2, tests, probe, FlashInfer fp8
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next29.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
S=128x128256,96x128256,64x128256,256x128256
G=-DEMBER_SOFTMAX_GRID=1
EMBER_EXTRA_CUDA_FLAGS=$G tests softmax_grid 120 tests/ops/test_sampling.py -x -k "not chi_square and not sampling"
EMBER_EXTRA_CUDA_FLAGS=$G bench softmax_grid 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_VEC_STORE=1 bench softmax_vs 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
step 150 peers && bench softmax 150 softmax --backends ember,torch_compile,flashinfer --shapes $S --dtypes fp32,bf16
step 70 vs_tests && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_VEC_STORE=1 tests softmax_vs 70 tests/ops/test_sampling.py -x -k "not chi_square and not sampling"
F="-DEMBER_DECODE_FP8_CVT=1 -DEMBER_DECODE_LAZY=2"
step 60 fp8_probe && timeout 60 python3 tools/decode_probe.py --variants base,fp8cvt,lazy2,cvtlazy --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe_fp8.txt
step 90 fp8_tests && EMBER_EXTRA_CUDA_FLAGS="$F" tests decode_cvt_lazy 90 tests/ops/test_decode.py -x
echo "== done at ${SECONDS}s"
