#!/usr/bin/env bash
# Session 26 (device tool, `.whl` carried; any Hopper card): EMBER_DECODE_TMMA=2 is the default
# (tokens as the MMA's M for fp8 KV only): the decode GPU tests at the default, then the fp8 row.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> STEP_LIMIT=150 bash tools/h100_next70.sh
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
tests default 130 tests/ops/test_decode.py
step 25 r8 && bench fp8 25 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti --backends ember
echo "== done at ${SECONDS}s"
