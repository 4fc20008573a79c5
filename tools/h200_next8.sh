#!/usr/bin/env bash
# The first H200 call of the next session (device tool, `.whl` carried; output under $OUT; run
# with timeout_s 600): the whole GPU suite (cut short in session 7), then the persistent softmax
# A/B (-DEMBER_SOFTMAX_PERSISTENT=1: its tests, then both builds against torch eager and
# torch.compile). Peers' full tables: tools/h200_issue5.sh act|sampling in a second call.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next8.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f2-9,14-; }
echo "== the whole GPU suite"
timeout 330 python3 -m pytest -q tests -p no:cacheprovider --durations=15 > $OUT/tests_all.txt 2>&1; echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^[0-9.]+s (call|setup)" $OUT/tests_all.txt | head -30
echo "== softmax: persistent A/B"
P=-DEMBER_SOFTMAX_PERSISTENT=1
EMBER_EXTRA_CUDA_FLAGS=$P timeout 90 python3 -m pytest -q -x tests/ops/test_sampling.py -p no:cacheprovider > $OUT/tests_persistent.txt 2>&1; echo "tests persistent rc $?"; tail -2 $OUT/tests_persistent.txt
bench softmax 150 softmax --backends ember,torch,torch_compile --shapes 128x128256,512x32000
EMBER_EXTRA_CUDA_FLAGS=$P bench softmax_persistent 60 softmax --backends ember --shapes 128x128256,512x32000
