#!/usr/bin/env bash
# Session 16, sixth call (device tool, `.whl` carried; output under $OUT; timeout_s 420).
# sampling_filter.cuh's two 64-bit bin scans became one helper (bins_scan; `duplicates` row
# since session 14): every filter kernel's SASS changed (a few instructions fewer), so
#   1. tests/ops/test_sampling.py at this tree
#   2. the filter rows at 128 x 128 256, this tree against the file before the change
#      (s16_old_filter.cuh, carried untracked for this call only), interleaved twice
# Predicted: unchanged within 1 %.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next41.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 400 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
tests sampling 150 tests/ops/test_sampling.py
R="--backends ember --shapes 128x128256"
F=ember/csrc/include/ember/sampling_filter.cuh
cp $F /tmp/new_filter.cuh
for round in 1 2; do
  for which in new old; do
    if [ $which = old ]; then cp s16_old_filter.cuh $F; else cp /tmp/new_filter.cuh $F; fi
    step 60 "$which$round" || break
    for r in top_p_sampling_from_probs top_k_top_p_sampling_from_logits top_p_renorm_probs; do
      bench ${which}_${r}_$round 40 $r $R
    done
  done
done
cp /tmp/new_filter.cuh $F
echo "== done at ${SECONDS}s"
