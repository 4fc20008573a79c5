#!/usr/bin/env bash
# Session 25 (device tool, `.whl` carried; any Hopper card): EMBER_DECODE_TMMA=1, tokens as the
# MMA's M and heads as N (S^T = K Q^T, O^T = V^T P^T with movmatrix; layouts checked by
# tools/decode_tmma_emulate.py): 434 -> 371 SASS instructions a warp a tile (fp8 d128, 168 -> 116
# registers), 503 -> 468 (bf16). The decode GPU tests under the switch, its harness rows (CUPTI),
# then the probe against the default (and with 3 fp8 stages at 4 CTAs an SM).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next68.sh   (carry .whl)
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
export EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_TMMA=1
tests tmma 170 tests/ops/test_decode.py
SH8="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti --backends ember"
step 45 r8 && bench fp8 45 decode $SH8
step 35 r8s && bench fp8skew 35 decode $SH8 --lengths pareto
step 45 r16 && bench bf16 45 decode --backends ember --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16 --dtypes bf16 --timing cupti
unset EMBER_EXTRA_CUDA_FLAGS
step 95 probe && timeout 95 python3 tools/decode_probe.py --variants base,tmma,tmma4 --cases fp8,fp8skew,u64,u256 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
echo "== done at ${SECONDS}s"
