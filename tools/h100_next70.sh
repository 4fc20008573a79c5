#!/usr/bin/env bash
# Written in session 26 for the next call (device tool, `.whl` carried; any Hopper card; timeout
# 600): EMBER_DECODE_TMMA=2 is the default since e266af8 (tokens as the MMA's M for fp8 KV only).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next70.sh
# (1) the decode GPU tests at the default (never run: its cubins are the SASS of builds that
# passed, `tools/sass_loop.py --same-as`); (2) the probe: the default against TMMA off (`tm0`)
# and on for every KV dtype (`tmma`) on the L2-resident cases that fill the machine (`hot*s`:
# the issue rate) and the latency-bound `hot8`, then fp8 64 x 4096; (3) fp8 and bf16 rows beside
# FlashInfer's tensor-core decode; (4) on an H200 only, issue 4's whole table (both FlashInfer
# paths), TMMA for 16-bit KV beside it, and the plan host time.
source tools/h200_lib.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
tests default 130 tests/ops/test_decode.py
step 100 probe && timeout 100 python3 tools/decode_probe.py --variants base,tm0,tmma --cases hot8s,hot16s,hot16g8s,hot8,fp8 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
FI="--backends ember,flashinfer[tensor_cores] --timing cupti"
step 80 r8 && bench fp8 80 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 $FI
if [[ "$GPU" != *H200* ]]; then echo "== not an H200: stopped at ${SECONDS}s"; exit 0; fi
ALL="--backends ember,flashinfer --timing cupti --dtypes bf16"
step 120 uni && bench uniform 120 decode --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16 $ALL
step 60 skew && bench pareto 60 decode --shapes 64x4096x32x8x128x16 --lengths pareto $ALL
step 60 small && bench small_page1 60 decode --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1 $ALL
# TMMA for 16-bit KV too: on the H200 the G = 8 shape is the one that trails FlashInfer (0.948x
# in session 17), where the loop's issue rate shows
step 60 tm16 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_TMMA=1 bench tmma16 60 decode --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --backends ember --timing cupti --dtypes bf16
step 40 plan && timeout 40 python3 tools/decode_plan_time.py --peers cuda_cores 2>&1 | tee -a $OUT/tables.md
echo "== done at ${SECONDS}s"
