#!/usr/bin/env bash
# Session 8's H200 calls (device tool, `.whl` carried; output under $OUT; timeout_s 600), after
# the fix of level 1's bins in radix_select (a shadowed variable that broke 22 filter tests):
#   (default)  sampling: the fixed filters' and softmax's GPU tests, the softmax A/B (persistent
#              kernel on chunks above 14 336, now the default, against -DEMBER_SOFTMAX_PERSISTENT=0),
#              the relative-digit A/B re-run at the fixed kernel, and the peers' tables
#              (torch eager, torch.compile, FlashInfer) for the targets' ops
#   SUITE=1    the whole GPU suite
# Activations' and RoPE's peer tables: tools/h200_issue5.sh act. Ran at 9bcb529 (its first form,
# the persistent-softmax and relative-digit A/B with an ncu profile, ran at 296deba; SUITE=1 too).
# At 9bcb529 the 4-backend softmax table hit its 150 s limit and the call its 480 s limit after
# the top-p peer rows (docs/perf/h200.md, session 8).
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next8.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.sampling import sampling_spec
t = time.perf_counter(); build_and_load(sampling_spec('fp32')); print(f'cold compile sampling_fp32: {time.perf_counter() - t:.2f} s')"
timeout 150 python3 -m pytest -q tests/ops/test_sampling_filters.py tests/ops/test_sampling.py -p no:cacheprovider > $OUT/tests_sampling.txt 2>&1
echo "tests sampling (default) rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests_sampling.txt | head -20
R=-DEMBER_FILTER_RELATIVE=1
EMBER_EXTRA_CUDA_FLAGS=$R timeout 60 python3 -m pytest -q tests/ops/test_sampling_filters.py -p no:cacheprovider > $OUT/tests_relative.txt 2>&1
echo "tests relative rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests_relative.txt | head -8
echo "== softmax"
bench softmax 150 softmax --backends ember,torch,torch_compile,flashinfer --shapes 128x128256,32x151936,512x32000
bench softmax_bf16 90 softmax --backends ember,torch_compile --shapes 128x128256 --dtypes bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PERSISTENT=0 bench softmax_single 60 softmax --backends ember --shapes 128x128256,512x32000
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PERSISTENT=0 bench softmax_single_bf16 60 softmax --backends ember --shapes 128x128256 --dtypes bf16
echo "== filters: relative digits at the fixed kernel"
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_k_sampling_from_probs; do
  EMBER_EXTRA_CUDA_FLAGS=$R bench ${op}_relative 40 $op --backends ember --shapes 128x128256
  EMBER_EXTRA_CUDA_FLAGS="$R -DEMBER_FILTER_LEAN0=1" bench ${op}_relative_lean 40 $op --backends ember --shapes 128x128256
done
echo "== peers"
bench top_p 150 top_p_sampling_from_probs --backends ember,torch,torch_compile,flashinfer
bench topk_topp_logits 120 top_k_top_p_sampling_from_logits --backends ember,torch,torch_compile,flashinfer
for op in top_k_sampling_from_probs min_p_sampling_from_probs top_k_renorm_probs top_p_renorm_probs top_k_mask_logits; do
  bench $op 40 $op --backends ember,flashinfer --shapes 128x128256
done
