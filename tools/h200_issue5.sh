#!/usr/bin/env bash
# The H200 run for issue 5 so far (gated activations, RoPE, softmax, sampling from probabilities):
# cold compile, GPU tests, and
# the harness tables against torch eager, torch.compile, FlashInfer and Liger. Device tool,
# `.whl` carried; output under $OUT.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_issue5.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.act import act_spec
t = time.perf_counter(); build_and_load(act_spec('bf16')); print(f'cold compile act_bf16: {time.perf_counter() - t:.2f} s')" | tee $OUT/compile.txt
timeout 200 python3 -m pytest -q tests/ops/test_act.py -p no:cacheprovider > $OUT/tests_act.txt 2>&1; tail -3 $OUT/tests_act.txt
ALL=ember,torch,torch_compile,flashinfer,liger
for op in silu_and_mul gelu_tanh_and_mul gelu_and_mul; do
  python3 -m ember.bench $op --backends $ALL --shapes 8192x14336 --out $OUT/bench.jsonl -q > $OUT/t_${op}_big.md 2>&1; tail -3 $OUT/t_${op}_big.md
  python3 -m ember.bench $op --backends $ALL --shapes 1x14336,16x14336,64x14336 --timing cuda_graph --out $OUT/bench.jsonl -q > $OUT/t_${op}_small.md 2>&1; tail -5 $OUT/t_${op}_small.md
done
echo "== rope"
timeout 200 python3 -m pytest -q tests/ops/test_rope.py -p no:cacheprovider > $OUT/tests_rope.txt 2>&1; tail -3 $OUT/tests_rope.txt
python3 -m ember.bench rope --backends ember,torch,torch_compile,flashinfer --shapes 8192x32x8x128 --out $OUT/bench.jsonl -q > $OUT/t_rope_big.md 2>&1; tail -4 $OUT/t_rope_big.md
python3 -m ember.bench rope --backends ember,torch,torch_compile,flashinfer --shapes 1x32x8x128,64x32x8x128 --timing cuda_graph --out $OUT/bench.jsonl -q > $OUT/t_rope_small.md 2>&1; tail -6 $OUT/t_rope_small.md
echo "== softmax"
timeout 200 python3 -m pytest -q tests/ops/test_sampling.py -p no:cacheprovider > $OUT/tests_sampling.txt 2>&1; tail -3 $OUT/tests_sampling.txt
python3 -m ember.bench softmax --backends ember,torch,torch_compile,flashinfer --out $OUT/bench.jsonl -q > $OUT/t_softmax.md 2>&1; tail -6 $OUT/t_softmax.md
python3 -m ember.bench sampling_from_probs --backends ember,torch,flashinfer --out $OUT/bench.jsonl -q > $OUT/t_sample.md 2>&1; tail -5 $OUT/t_sample.md
