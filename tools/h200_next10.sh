#!/usr/bin/env bash
# Session 9's H200 calls (device tool, `.whl` carried; output under $OUT; timeout_s 600; fire each
# as soon as the previous returns, while the machine is warm):
#   (default)  GPU tests of the sampling files at HEAD's defaults (the bulk-copy softmax, online
#              normaliser, lean filter passes, two-phase level 0 in the top-p selects), the
#              softmax tests again on the previous kernels (-DEMBER_SOFTMAX_BULK=0, and with the
#              two-exchange normaliser); the filters' A/B
#              (two-phase level 0 in no / the mass / every select; the full passes), the softmax
#              A/B (bulk / register-prefetch persistent / two exchanges) and the softmax, top-p and
#              top-k+top-p peers (torch.compile, FlashInfer) in the same run (~540 s)
#   PEERS=1    the sampling tests at the defaults the first call chose (failures printed), the
#              one test that failed with -DEMBER_FILTER_SPLIT0=2 three times, RoPE's tests and A/B
#              with -DEMBER_ROPE_STATIC=1 and =2 and its peers, merge_states against FlashInfer
#              (issue 4)
#   SUITE=1    the whole GPU suite (430 s at 296deba)
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next10.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
if [ "${PEERS:-0}" = 1 ]; then
  tests sampling_final 150 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
  grep -E "^E |Error|assert" $OUT/tests_sampling_final.txt | head -20
  for i in 1 2 3; do
    EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_SPLIT0=2 tests split2_$i 60 tests/ops/test_sampling_filters.py -k first_pass_cut
    grep -E "^E " $OUT/tests_split2_$i.txt | head -6
  done
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ROPE_STATIC=1 tests rope_static 120 tests/ops/test_rope.py
  grep -E "^E " $OUT/tests_rope_static.txt | head -10
  bench rope_big 150 rope --backends ember,torch_compile,flashinfer --shapes 8192x32x8x128
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ROPE_STATIC=1 bench rope_static 40 rope --backends ember --shapes 8192x32x8x128,512x32x8x128
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ROPE_STATIC=2 bench rope_static2 40 rope --backends ember --shapes 8192x32x8x128
  bench merge_states 120 merge_states --backends ember,flashinfer  # issue 4: v3 never timed against it
  exit 0
fi
tests sampling 150 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_BULK=0 tests softmax_nobulk 60 tests/ops/test_sampling.py -k softmax
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_SOFTMAX_BULK=0 -DEMBER_SOFTMAX_ONLINE=0" tests softmax_old 60 tests/ops/test_sampling.py -k softmax
echo "== filters A/B: two-phase level 0 in the mass selects (default) / none / every select; full passes"
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits; do
  bench ${op} 120 $op --backends ember,flashinfer --shapes 128x128256,1x128256
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_SPLIT0=0 bench ${op}_split0 30 $op --backends ember --shapes 128x128256
  EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_SPLIT0=1 bench ${op}_split1 30 $op --backends ember --shapes 128x128256
  EMBER_EXTRA_CUDA_FLAGS="-DEMBER_FILTER_LEAN=0 -DEMBER_FILTER_SPLIT0=0" bench ${op}_full 30 $op --backends ember --shapes 128x128256
done
echo "== softmax A/B and peers"
S=128x128256,512x32000,1x128256,32x151936
bench softmax 200 softmax --backends ember,torch_compile,flashinfer --shapes $S
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_BULK=0 bench softmax_nobulk 60 softmax --backends ember --shapes $S
EMBER_EXTRA_CUDA_FLAGS="-DEMBER_SOFTMAX_BULK=0 -DEMBER_SOFTMAX_ONLINE=0" bench softmax_old 60 softmax --backends ember --shapes 128x128256,512x32000
bench softmax_bf16 60 softmax --backends ember,torch_compile --shapes 128x128256 --dtypes bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_BULK=0 bench softmax_nobulk_bf16 40 softmax --backends ember --shapes 128x128256 --dtypes bf16
