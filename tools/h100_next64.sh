#!/usr/bin/env bash
# Session 22 (device tool, `.whl` carried; any Hopper card): the decode probe's first honest
# A/B. Until this session tools/decode_probe.py timed the default module for every variant (it
# bound the plan, not the module; see run_variant), so every probe-only comparison since
# session 9 compared the default kernel with itself on another plan. This call re-measures
# session 21's fp8 switches (the harness, in separate processes, had WT=32 + CONV 212.7 us
# against the default 224.4 on an H100) and the 16-bit pipeline variants with the fixed probe,
# the switches removed on those timings (built from their commits' decode_tc.cuh, `.snap`
# carried: see decode_probe.py's VARIANTS), then harness rows (CUPTI) for the fp8 candidates
# beside FlashInfer's tensor-core fp8 decode. On an H200 also the softmax and KV2 rows owed.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next64.sh   (carry .whl, .snap)
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
B="-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=3 -DEMBER_DECODE_MINB=2"
C="$B -DEMBER_DECODE_FP8_CONV=1"
K="-k fp8 tests/ops/test_decode.py"
EMBER_EXTRA_CUDA_FLAGS="$C" tests fp8_f32bc 100 $K
step 200 probe8 && timeout 200 python3 tools/decode_probe.py --variants base,cv,f32a,f32ac,f32b,f32bc,fp8r4,b14,cvt,lazy,cvtlazy --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
SH="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti"
step 40 h_base && bench fp8_base 40 decode --backends ember $SH
step 40 h_cv && EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_FP8_CONV=1" bench fp8_cv 40 decode --backends ember $SH
step 40 h_f32bc && EMBER_EXTRA_CUDA_FLAGS="$C" bench fp8_f32bc 40 decode --backends ember $SH
step 90 h_fi && bench fp8_fi 90 decode --backends flashinfer[tensor_cores] $SH
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ "$GPU" == *H200* ]]; then  # 16-bit K/V streams at an H100's copy limit: only an H200 tells
step 190 probe16 && timeout 190 python3 tools/decode_probe.py --variants base,s2b,kv2,b16,cpt,ufast,b17,qkob,persist,l3c,l2pf --cases u256,u64,u128,skew --rounds 3 2>&1 | grep -v "^built" | tee -a $OUT/probe.txt
  S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
  step 60 sm && bench softmax 60 $S
  softmax_peer_rows 60 $S
  kv2_rows
fi
echo "== done at ${SECONDS}s"
