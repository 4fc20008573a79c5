#!/usr/bin/env bash
# Written in session 27 for its last call (device tool, `.whl` carried; timeout 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next72.sh
# EMBER_DECODE_ADDR=1 is the default since session 27 (its cubins are those of the ADDR=1 build
# whose decode tests passed and whose rows are in h100-2026-12-07-s27b.jsonl). On an H200 (or
# with TABLE=1) issue 4's whole table first, at the default, with the element-unit form
# (ADDR=0) beside it; then the whole GPU suite: tests/ops (every kernel test), tests/unit,
# tests/jit, each in what time is left (`step`).
source tools/h200_lib.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
if [[ "$GPU" == *H200* || "${TABLE:-0}" == 1 ]]; then
  cold_compile_both
  issue4_table
  E="--backends ember --timing cupti --dtypes bf16"; U=$ISSUE4_UNIFORM
  step 45 a0 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_ADDR=0 bench addr0 45 decode --shapes $U,4x32768x32x8x128x16,32x4096x32x8x128x1 $E
  step 30 plan && timeout 30 python3 tools/decode_plan_time.py 2>&1 | tee -a $OUT/tables.md
fi
step 60 ops && tests ops $(( $(left) - 20 )) tests/ops
step 20 unit && tests unit $(( $(left) < 90 ? $(left) : 90 )) tests/unit
step 30 jit && tests jit $(left) tests/jit
echo "== done at ${SECONDS}s"
