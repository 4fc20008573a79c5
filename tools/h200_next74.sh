#!/usr/bin/env bash
# Written in session 31 (device tool, `.whl` carried; timeout 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next74.sh
# Session 31 moved decode_tc.cuh's query-row address into one helper (`q_head_row`). Its SASS is
# instruction for instruction that of the GPU-tested build for every group size but 1
# (`tools/sass_loop.py --same-as=@b8f7351`, 40 specializations); at G = 1 the prologue differs
# (the main loop's count and registers do not). So any card is worth a call now:
# - an H200: h200_tables (issue 4's table, cold compile, plan time, issue 5's two unmet rows
#   beside their peers), then tests/ops in what time is left (h200_next73.sh's call, which it
#   replaces);
# - any other card: the whole GPU suite (tests/ops, tests/unit, tests/jit), which holds the
#   G = 1 decode tests the changed prologue needs.
source tools/h200_lib.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
if [[ "$GPU" == *H200* || "${TABLE:-0}" == 1 ]]; then
  h200_tables
  step 60 ops && tests ops $(( $(left) - 10 )) tests/ops
else
  step 60 ops && tests ops $(( $(left) - 20 )) tests/ops
  step 20 unit && tests unit $(( $(left) < 90 ? $(left) : 90 )) tests/unit
  step 30 jit && tests jit $(left) tests/jit
fi
echo "== done at ${SECONDS}s"
