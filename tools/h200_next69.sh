#!/usr/bin/env bash
# Session 26 (device tool, `.whl` carried; any Hopper card): the decode loop's issue rate with
# DRAM out of the way (L2-resident probe cases), default against EMBER_DECODE_TMMA=1, then the
# TMMA build's harness rows beside FlashInfer's tensor-core decode in the same call.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> STEP_LIMIT=280 bash tools/h200_next69.sh
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
step 80 probe && timeout 80 python3 tools/decode_probe.py --variants base,tmma --cases hot8,hot16,hot16g8,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
export EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_TMMA=1
SH8="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti --backends ember,flashinfer[tensor_cores]"
step 90 r8 && bench fp8 90 decode $SH8
step 90 r16 && bench bf16 90 decode --backends ember,flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti
echo "== done at ${SECONDS}s"
