#!/usr/bin/env bash
# Written in session 23 for the next call (device tool, `.whl` and `.snap` carried; any Hopper
# card; never run: superseded by session 24's loop diet, tools/README.md). fp8: 128-token
# tiles with the cvt default at 3 CTAs an SM (f32c2: 2 stages, 168
# registers, 32 bytes spilled at d128) against the default and f32c (3 stages, 2 CTAs an SM:
# 199.1 vs 208.7 us uniform but 193.2 vs 180.7 on Pareto lengths on an H100, h100_next65.sh);
# v1 (the CUDA-core kernel) is the control that must differ. On an H200 only: the 16-bit levers
# removed on the void probe (sessions 16-17) and KV2, then the fp8 rows against FlashInfer for
# issue 4's table.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next66.sh   (carry .whl, .snap)
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
step 120 probe8 && timeout 120 python3 tools/decode_probe.py --variants base,v1,f32c,f32c2 --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
SH="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti"
step 80 h_fi && bench fp8_fi 80 decode --backends ember,flashinfer[tensor_cores] $SH
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ "$GPU" == *H200* ]]; then  # 16-bit K/V streams at an H100's copy limit: only an H200 tells
  step 200 probe16 && timeout 200 python3 tools/decode_probe.py --variants base,v1,s2b,kv2,b16,cpt,ufast,b17,qkob,persist,l3c,l2pf --cases u256,u64,u128 --rounds 3 2>&1 | grep -v "^built" | tee -a $OUT/probe.txt
  kv2_rows
fi
echo "== done at ${SECONDS}s"
