#!/usr/bin/env bash
# Session 8, last H200 call: the filters with relative digits and a lean level 0 as the default (tests; rows against the absolute-digit build), and the persistent softmax default rows. EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_verify8.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f3-8,11; }
timeout 70 python3 -m pytest -q tests/ops/test_sampling_filters.py -p no:cacheprovider > $OUT/tests_filters.txt 2>&1
echo "tests filters (default: relative + lean0) rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests_filters.txt | head -8
bench softmax 25 softmax --backends ember --shapes 128x128256,512x32000
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_k_sampling_from_probs; do bench $op 25 $op --backends ember --shapes 128x128256,1x128256; done
export EMBER_EXTRA_CUDA_FLAGS="-DEMBER_FILTER_RELATIVE=0 -DEMBER_FILTER_LEAN0=0"
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_k_sampling_from_probs; do bench ${op}_abs 30 $op --backends ember --shapes 128x128256,1x128256; done
