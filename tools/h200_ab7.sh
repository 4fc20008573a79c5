#!/usr/bin/env bash
# Session 7's A/B run on the H200 (device tool, `.whl` carried; output under $OUT; ~6-8 minutes):
# the GPU tests of the changed families with the new defaults (RoPE's grouped kernel, the filters'
# survivor list gathered at radix level 0), the activation tests on the flat kernel, then ember-only
# rows for every variant that the -D switches build, so the defaults can be chosen on numbers:
#   activations: 2-D grid (default) / flat grid, 1, 2 or 4 accesses a thread / evict-first hints
#   RoPE: grouped kernel with 1, 2, 4, 8 heads a thread / the b2a2be8 kernel (GROUPED=0)
#   filters: survivor list at level 0 (default) / none (COMPACT=0)
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_ab7.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f2-9,14-; }
tests() { local tag=$1 t=$2; shift 2; timeout $t python3 -m pytest -q -x "$@" -p no:cacheprovider > $OUT/tests_$tag.txt 2>&1; echo "tests $tag rc $?"; grep -E "passed|failed|^E " $OUT/tests_$tag.txt | head -12; }
tests default 200 tests/ops/test_sampling_filters.py tests/ops/test_act.py tests/ops/test_rope.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ACT_FLAT=1 tests act_flat 80 tests/ops/test_act.py
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_ACT_FLAT=1 -DEMBER_ACT_STREAM=1" tests act_flat_stream 80 tests/ops/test_act.py -k "large or 1024 or 2053"
echo "== activations"
bench silu 90 silu_and_mul --backends ember,torch_compile --shapes 8192x14336
for v in "FLAT=1 -DEMBER_ACT_FLAT_VPT=1" "FLAT=1 -DEMBER_ACT_FLAT_VPT=2" "FLAT=1 -DEMBER_ACT_FLAT_VPT=4" "STREAM=1" "FLAT=1 -DEMBER_ACT_STREAM=1"; do
  tag=$(echo "$v" | tr -cd 'A-Z0-9=_' | tr '=' '_'); echo "   variant -DEMBER_ACT_$v"
  EMBER_EXTRA_CUDA_FLAGS="-DEMBER_ACT_$v" bench silu_$tag 40 silu_and_mul --backends ember --shapes 8192x14336
done
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_ACT_FLAT=1" bench gelu_tanh_flat 60 gelu_tanh_and_mul --backends ember,torch_compile --shapes 8192x14336
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_ACT_FLAT=1" bench silu_small_flat 60 silu_and_mul --backends ember --shapes 1x14336,64x14336,512x14336 --timing cuda_graph
echo "== rope"
bench rope 40 rope --backends ember --shapes 8192x32x8x128,2048x32x8x128
bench rope_small 40 rope --backends ember --shapes 1x32x8x128,64x32x8x128,512x32x8x128 --timing cuda_graph
for v in "HPT=1" "HPT=2" "HPT=8" "GROUPED=0"; do
  echo "   variant -DEMBER_ROPE_$v"
  EMBER_EXTRA_CUDA_FLAGS="-DEMBER_ROPE_$v" bench rope_${v/=/_} 40 rope --backends ember --shapes 8192x32x8x128,2048x32x8x128
done
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_ROPE_GROUPED=0" bench rope_small_old 40 rope --backends ember --shapes 1x32x8x128,64x32x8x128,512x32x8x128 --timing cuda_graph
echo "== filters"
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_k_sampling_from_probs top_p_renorm_probs; do
  bench $op 40 $op --backends ember --shapes 128x128256,1x128256
done
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_COMPACT=0 bench top_p_nocompact 40 top_p_sampling_from_probs --backends ember --shapes 128x128256
