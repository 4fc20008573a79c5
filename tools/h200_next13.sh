#!/usr/bin/env bash
# Session 10's third H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 300):
# merge_states_vec_kernel in its two forms, chosen by the state count (two states in flight for
# 1-2 states, 40 registers and 6 CTAs an SM; four for more, 64 and 4): the merge tests (new
# cases for 1, 2 and 5 states), then the harness against FlashInfer and against
# -DEMBER_MERGE_VEC=0 (merge_states_kernel) in the same run; then tools/cluster_probe.cu.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next13.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests merge 60 tests/ops/test_decode.py -k merge
bench merge 120 merge_states --backends ember,flashinfer
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_MERGE_VEC=0 bench merge_vec0 40 merge_states --backends ember
# how many clusters of each size fit (the persistent softmax ran 30 clusters of 8, not 33)
nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o /tmp/cluster_probe tools/cluster_probe.cu &&
  /tmp/cluster_probe | tee $OUT/cluster_probe.md
