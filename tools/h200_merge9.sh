#!/usr/bin/env bash
# Session 9's last H200 call (device tool, `.whl` carried): merge_states' vector kernel
# (EMBER_MERGE_VEC, the default) — its GPU tests, then the harness rows against the old kernel
# (-DEMBER_MERGE_VEC=0) and FlashInfer (whose JIT compile comes last; a timeout keeps the rows
# already measured).
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_merge9.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
timeout 60 python3 -m pytest -q tests/ops/test_decode.py -k merge -p no:cacheprovider > $OUT/tests_merge.txt 2>&1; echo "tests merge rc $?"; grep -E "^E |passed|failed" $OUT/tests_merge.txt | head -12
timeout 30 python3 -m ember.bench merge_states --backends ember --out $OUT/bench.jsonl -q 2>&1 | grep -E "^\| [a-z]" | cut -d'|' -f3-8,11,13-
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_VEC=0 timeout 30 python3 -m ember.bench merge_states --backends ember --out $OUT/bench.jsonl -q 2>&1 | grep -E "^\| [a-z]" | cut -d'|' -f3-8,11,13-
timeout 90 python3 -m ember.bench merge_states --backends flashinfer --out $OUT/bench.jsonl -q 2>&1 | grep -E "^\| [a-z]" | cut -d'|' -f3-8,11,13-
