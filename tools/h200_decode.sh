#!/usr/bin/env bash
# The H200 run for the decode family (issue 4): cold compiles, GPU tests, plan host time, harness
# tables against both FlashInfer decode paths. Device tool, `.whl` carried; output under $OUT.
# Name the commit the rows should record (the device's copy of the checkout has a stale .git):
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_decode.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== cold compile (fresh caches)"
EMBER_CACHE_DIR=/tmp/ember-cold python3 tools/decode_cold_compile.py --planner --peers 2>&1 | tee $OUT/compile.txt
echo "== decode tests"
timeout 300 python3 -m pytest -q tests/ops/test_decode.py -p no:cacheprovider > $OUT/tests_decode_full.txt 2>&1; tail -15 $OUT/tests_decode_full.txt | tee $OUT/tests.txt
echo "== plan host time"
python3 tools/decode_plan_time.py 2>&1 | tee $OUT/plan.txt
B="python3 -m ember.bench decode --backends ember,flashinfer --out $OUT/bench.jsonl -q"
$B --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16 > $OUT/t_uniform.md 2>&1; tail -8 $OUT/t_uniform.md
$B --shapes 64x4096x32x8x128x16 --lengths pareto > $OUT/t_skewed.md 2>&1; tail -4 $OUT/t_skewed.md
$B --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1 > $OUT/t_small_page1.md 2>&1; tail -6 $OUT/t_small_page1.md
$B --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 > $OUT/t_fp8.md 2>&1; tail -4 $OUT/t_fp8.md
python3 -m ember.bench append_kv --backends ember,flashinfer --out $OUT/bench.jsonl -q > $OUT/t_append.md 2>&1; tail -4 $OUT/t_append.md
python3 -m ember.bench merge_states --backends ember,flashinfer --out $OUT/bench.jsonl -q > $OUT/t_merge.md 2>&1; tail -4 $OUT/t_merge.md
[ "${SKIP_REST:-0}" = 1 ] && exit 0
echo "== the rest of the suite"
timeout 240 python3 -m pytest -q tests -p no:cacheprovider --ignore=tests/ops/test_decode.py 2>&1 | tail -4 | tee -a $OUT/tests.txt
[ -n "${PROBE:-}" ] || exit 0
echo "== probe: $PROBE"
timeout 90 python3 tools/decode_probe.py $PROBE 2>&1 | tee $OUT/probe.txt | grep -v "^built"
