#!/usr/bin/env bash
# Session 23 (device tool, `.whl` and `.snap` carried; any Hopper card): the fp8 decode kernel
# with the cvt conversion as its default (EMBER_DECODE_FP8_CONV=2; h100_next64.sh's fixed probe
# had the cvt form at a0b5bbb 204.3 us against 221.5 there and the bit moves' 220.8 here). Its
# fp8 GPU tests, the probe against the old conversions (c0, cv), 128-token tiles with cvt
# (f32c) and the old header's cvt + lazy rescale, and harness rows (CUPTI) with the
# bit-move build and FlashInfer's tensor-core fp8 decode, uniform and Pareto.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next65.sh   (carry .whl, .snap)
STEP_LIMIT=${STEP_LIMIT:-300}
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
tests fp8_cvt 80 -k "fp8 or e4m3" tests/ops/test_decode.py
SH="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti"
step 80 h_fi && bench fp8_fi 80 decode --backends ember,flashinfer[tensor_cores] $SH
step 35 h_c0 && EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_FP8_CONV=0" bench fp8_c0 35 decode --backends ember $SH
step 90 probe8 && timeout 90 python3 tools/decode_probe.py --variants base,c0,f32c,cvtlazy --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
step 40 h_skew && bench fp8_skew 40 decode --backends ember,flashinfer[tensor_cores] $SH --lengths pareto
echo "== done at ${SECONDS}s"
