#!/usr/bin/env bash
# Session 20 (device tool, `.whl` carried; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next59.sh
# (1) tools/release_probe.cu: does a GPU-scope release add wait for the warp's loads in flight?
# (2) the softmax GPU tests under EMBER_SOFTMAX_LATE0=1 (warp 0 issues the next row's loads
#     after thread 0's release add); (3) softmax at HEAD against LATE0=1, interleaved twice;
# (4) on an H200 only: the peers, then the KV2 decode rows (h200_lib.sh); (5) tests/ops.
source tools/h200_lib.sh  # wheels, environment, bench, tests, step, the H200 rows
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a tools/release_probe.cu -o /tmp/rp && timeout 60 /tmp/rp | tee $OUT/release_probe.txt
python3 -m ember.bench ceilings -q > /dev/null 2>&1
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_LATE0=1 tests late0 150 tests/ops/test_sampling.py -k "softmax or large"
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
for r in 1 2; do
  step 40 "sm $r" && bench softmax_$r 40 $S
  step 40 "late0 $r" && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_LATE0=1 bench late0_$r 40 $S
done
if [[ "$GPU" == *H200* ]]; then
  softmax_peer_rows 40 $S
  kv2_rows
fi
step 120 suite && tests ops $((585 - SECONDS)) tests/ops
echo "== done at ${SECONDS}s"
