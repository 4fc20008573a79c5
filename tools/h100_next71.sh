#!/usr/bin/env bash
# Written in session 27 for its second call (device tool, `.whl` carried; any Hopper card;
# timeout 600): issue 4's whole acceptance table in one run, on whichever card comes —
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next71.sh
# (1) the cold compile of one decode module (a fresh cache of its own) and FlashInfer's first
# plan + run on both paths; (2) the decode GPU tests at the default; (3) the table: the three
# uniform shapes, Pareto, B=4 x 32 768, page 1, fp8 KV, each beside both FlashInfer paths
# (`--backends ember,flashinfer`); (4) the same shapes under EMBER_DECODE_ADDR=1 (the address
# diet: its tests passed on an H100 in session 27's first call, streaming tied, latency-bound
# cases -2 to -10 % but the L2-resident G = 8 case +3.5 %); (5) the probe on the G = 8 question
# (base against addr, 5 rounds); (6) plan() host time beside FlashInfer's two paths.
# (Since its run, the cold compile and the table steps are tools/decode_cold_compile.py and
# h200_lib.sh's issue4_table, shared with h200_next72.sh: the same steps.)
source tools/h200_lib.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
EMBER_CACHE_DIR=/tmp/ember-cold timeout 120 python3 tools/decode_cold_compile.py --planner --peers 2>&1 | tee $OUT/compile.txt
tests default 60 tests/ops/test_decode.py
issue4_table
E="--backends ember --timing cupti --dtypes bf16"; U=$ISSUE4_UNIFORM
step 45 au && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_ADDR=1 bench addr_uni 45 decode --shapes $U,4x32768x32x8x128x16,32x4096x32x8x128x1 $E
step 30 a8 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_ADDR=1 bench addr_fp8 30 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 $E
step 90 probe && timeout 90 python3 tools/decode_probe.py --variants base,addr --cases hot16g8s,hot16g8,hot16s,u64g8,u256 --rounds 5 2>&1 | grep -v "^built " | tee $OUT/probe.txt
step 40 plan && timeout 40 python3 tools/decode_plan_time.py 2>&1 | tee -a $OUT/tables.md
echo "== done at ${SECONDS}s"
