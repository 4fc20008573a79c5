#!/usr/bin/env bash
# Written in session 29 (device tool, `.whl` carried; timeout 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next73.sh
# The H200 call both open issues wait for. Session 29's first call ran the whole GPU suite on an
# H100 at `ac64996` (all passed), so on any card but an H200 this exits at once (costing only the
# machine's start) unless TABLE=1. On an H200: the decode module's cold compile (first nvcc use,
# then toolchain warm), issue 4's whole table beside both FlashInfer paths, plan() time, then
# issue 5's two unmet rows side by side with their peers (softmax 128 x 128 256 fp32 and bf16;
# silu_and_mul 8192 x 2·14 336), then tests/ops in what time is left.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
if [[ "$GPU" != *H200* && "${TABLE:-0}" != 1 ]]; then echo "== not an H200: nothing run"; exit 0; fi
source tools/h200_lib.sh
python3 -m ember.bench ceilings -q > /dev/null 2>&1
h200_tables
step 60 ops && tests ops $(( $(left) - 10 )) tests/ops
echo "== done at ${SECONDS}s"
