#!/usr/bin/env bash
# A short H200 check after a decode change (device tool, `.whl` carried; output under $OUT):
# the decode GPU tests that touch planning/upload, fp8, merge and graphs; the fp8 kernel A/B
# (register conversion at 3 and 2 CTAs/SM vs the shared-memory pass); then, as time allows,
# merge_states and fp8 decode against FlashInfer and the plan host time. Each step is bounded.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_decode_final.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
echo "== decode tests (subset)"
timeout 75 python3 -m pytest -q tests/ops/test_decode.py -p no:cacheprovider -k "uniform or graph or fp8 or merge or split or skewed or append" > $OUT/tests_subset.txt 2>&1; echo "rc $?"; tail -6 $OUT/tests_subset.txt
echo "== fp8 probe"
timeout 45 python3 tools/decode_probe.py --variants base,fp8r2,fp8pass --cases fp8 --rounds 2 2>&1 | grep -v "^built" | tee $OUT/probe.txt
timeout 30 python3 -m ember.bench merge_states --backends ember,flashinfer --out $OUT/bench.jsonl -q > $OUT/t_merge.md 2>&1; tail -4 $OUT/t_merge.md
timeout 40 python3 -m ember.bench decode --backends ember,flashinfer[tensor_cores] --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --out $OUT/bench.jsonl -q > $OUT/t_fp8.md 2>&1; tail -4 $OUT/t_fp8.md
timeout 40 python3 tools/decode_plan_time.py --peers cuda_cores 2>&1 | tee $OUT/plan.txt
