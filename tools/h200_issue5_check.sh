#!/usr/bin/env bash
# A short H200 check after a sampling/activation/RoPE change (device tool, `.whl` carried;
# output under $OUT): the filter, activation and RoPE GPU tests, then ember's filter rows, RoPE
# (the prefetching kernel and, for A/B, the b2a2be8 one) and the activations against
# torch.compile. Each step is bounded; for the peers' full tables use h200_issue5.sh.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_issue5_check.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f2-9,14-; }
timeout 120 python3 -m pytest -q -x tests/ops/test_sampling_filters.py tests/ops/test_act.py tests/ops/test_rope.py -p no:cacheprovider > $OUT/tests.txt 2>&1; echo "tests rc $?"; grep -E "passed|failed|Error|^E " $OUT/tests.txt | head -20
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_k_sampling_from_probs top_p_renorm_probs top_k_mask_logits; do
  bench $op 30 $op --backends ember --shapes 128x128256,1x128256
done
echo "== A/B: survivor list for radix levels 2-3 (-DEMBER_FILTER_COMPACT=1)"
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_COMPACT=1 timeout 90 python3 -m pytest -q -x tests/ops/test_sampling_filters.py -p no:cacheprovider > $OUT/tests_compact.txt 2>&1; echo "tests (compact) rc $?"; grep -E "passed|failed|^E " $OUT/tests_compact.txt | head -8
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits; do
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_COMPACT=1 bench ${op}_compact 40 $op --backends ember --shapes 128x128256,1x128256
done
bench softmax 30 softmax --backends ember,torch --shapes 128x128256
bench rope 40 rope --backends ember --shapes 8192x32x8x128
bench rope_small 40 rope --backends ember --shapes 1x32x8x128,64x32x8x128 --timing cuda_graph
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ROPE_PREFETCH=0 bench rope_old 60 rope --backends ember --shapes 8192x32x8x128,1x32x8x128
bench silu 60 silu_and_mul --backends ember,torch_compile --shapes 8192x14336
bench gelu_tanh 60 gelu_tanh_and_mul --backends ember,torch_compile --shapes 8192x14336
