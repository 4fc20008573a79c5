#!/usr/bin/env bash
# The H200 run for issue 5 (device tool, `.whl` carried; output under $OUT), in two parts that
# each fit one call:
#   act:      gated activations and RoPE: GPU tests, harness tables (eager, torch.compile,
#             FlashInfer, Liger)
#   sampling: softmax, sampling, filters: cold compile, GPU tests, harness tables (eager,
#             torch.compile, FlashInfer)
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_issue5.sh act|sampling
set -uo pipefail
part=${1:-act}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
bench() { local tag=$1; shift; timeout ${BENCH_LIMIT:-150} python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\|" $OUT/t_$tag.md | tail -n +3; }
if [ "$part" = act ]; then
  python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.act import act_spec
t = time.perf_counter(); build_and_load(act_spec('bf16')); print(f'cold compile act_bf16: {time.perf_counter() - t:.2f} s')" | tee $OUT/compile.txt
  timeout 150 python3 -m pytest -q -x tests/ops/test_act.py -p no:cacheprovider > $OUT/tests_act.txt 2>&1; echo "tests act rc $?"; tail -3 $OUT/tests_act.txt
  timeout 150 python3 -m pytest -q -x tests/ops/test_rope.py -p no:cacheprovider > $OUT/tests_rope.txt 2>&1; echo "tests rope rc $?"; tail -3 $OUT/tests_rope.txt
  ALL=ember,torch,torch_compile,flashinfer,liger
  bench silu_big silu_and_mul --backends $ALL --shapes 8192x14336
  bench silu_small silu_and_mul --backends $ALL --shapes 1x14336,16x14336,64x14336 --timing cuda_graph
  bench gelu_tanh gelu_tanh_and_mul --backends $ALL --shapes 8192x14336
  bench gelu gelu_and_mul --backends $ALL --shapes 8192x14336
  bench rope_big rope --backends ember,torch,torch_compile,flashinfer --shapes 8192x32x8x128
  bench rope_small rope --backends ember,torch,torch_compile,flashinfer --shapes 1x32x8x128,64x32x8x128 --timing cuda_graph
else
  python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.sampling import sampling_spec
t = time.perf_counter(); build_and_load(sampling_spec('fp32')); print(f'cold compile sampling_fp32: {time.perf_counter() - t:.2f} s')" | tee $OUT/compile.txt
  timeout 200 python3 -m pytest -q tests/ops/test_sampling_filters.py tests/ops/test_sampling.py -p no:cacheprovider > $OUT/tests_sampling.txt 2>&1; echo "tests sampling rc $?"; grep -E "passed|failed|Error|assert" $OUT/tests_sampling.txt | head -30
  B=ember,torch,torch_compile,flashinfer
  BENCH_LIMIT=240 bench softmax softmax --backends $B --shapes 128x128256,32x151936
  bench top_p top_p_sampling_from_probs --backends $B
  bench topk_topp_logits top_k_top_p_sampling_from_logits --backends $B
  for op in top_k_sampling_from_probs min_p_sampling_from_probs top_k_top_p_sampling_from_probs sampling_from_logits top_k_renorm_probs top_p_renorm_probs top_k_mask_logits sampling_from_probs; do
    bench $op $op --backends ember,flashinfer --shapes 128x128256
  done
fi
